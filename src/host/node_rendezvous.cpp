#include "host/node_rendezvous.h"

#include <unistd.h>

#include <thread>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "distributed/store_protocol.h"

namespace slapo {

namespace {

using dist::store_protocol::text;
std::vector<uint8_t> bytes(const std::string& s) { return dist::store_protocol::field(s); }
std::string node_key(int node) { return fmt::format("nodes/{}", node); }

std::string host_name() {
  char name[256] = {0};
  ::gethostname(name, sizeof(name) - 1);
  return name;
}

}  // namespace

NodeRendezvous::NodeRendezvous(const LaunchOptions& o, std::chrono::seconds silence_limit)
    : options_(o), silence_limit_(silence_limit) {
  try {
    meet();
  } catch (const Error&) {
    // node 0's store lingers a moment so the other launchers can read the agreement and say why too
    if (server_ && o.nnodes > 1) std::this_thread::sleep_for(std::chrono::seconds(2));
    throw;
  } catch (const std::exception& e) {
    throw Error(fmt::format("run: node {} lost the rendezvous at {}:{}: {}", o.node_rank, o.master_addr, o.master_port,
                            e.what()));
  }
  next_check_ = std::chrono::steady_clock::now();
  beats_.assign(o.nnodes, {-1, next_check_});
  lost_.assign(o.nnodes, false);
}

void NodeRendezvous::meet() {
  const LaunchOptions& o = options_;
  auto timeout = std::chrono::seconds(o.rdzv_timeout_s);
  std::string where = fmt::format("{}:{}", o.master_addr, o.master_port);
  if (o.node_rank == 0) {
    try {
      server_ = std::make_unique<dist::StoreServer>(o.master_addr, o.master_port);
    } catch (const std::exception& e) {
      throw Error(fmt::format("run: node 0 serves the rendezvous store on --master-addr: {}", e.what()));
    }
  }
  try {
    store_ = c10::make_intrusive<dist::StoreClient>(o.master_addr, o.master_port, timeout);
  } catch (const std::exception& e) {
    throw Error(fmt::format("run: node {} cannot join the run at {} (--master-addr, --master-port): {}", o.node_rank,
                            where, e.what()));
  }
  nlohmann::json me = {{"host", host_name()}, {"pid", ::getpid()}, {"nnodes", o.nnodes}, {"nproc", o.nproc},
                       {"max_restarts", o.max_restarts}};
  std::string mine = me.dump();
  std::string holder = text(store_->compareSet(node_key(o.node_rank), {}, bytes(mine)));
  if (holder != mine) {
    auto other = nlohmann::json::parse(holder, nullptr, false);
    throw Error(fmt::format("run: --node-rank {} is already taken by the launcher on {} (pid {}); give each node its "
                            "own rank, 0 .. {}",
                            o.node_rank, other.value("host", "?"), other.value("pid", 0), o.nnodes - 1));
  }
  store_->set_ephemeral(fmt::format("alive/{}", o.node_rank), bytes("1"));  // gone the moment this launcher is
  std::vector<std::string> keys;
  for (int n = 0; n < o.nnodes; ++n) keys.push_back(node_key(n));
  try {
    store_->wait(keys, timeout);
  } catch (const std::exception&) {
    std::vector<int> missing;
    for (int n = 0; n < o.nnodes; ++n)
      if (!store_->check({node_key(n)})) missing.push_back(n);
    throw Error(fmt::format("run: node{} {} of {} did not join at {} within {} s (--rdzv-timeout); start one launcher "
                            "per node with the same --nnodes, --master-addr and --master-port",
                            missing.size() == 1 ? "" : "s", fmt::join(missing, ", "), o.nnodes, where,
                            o.rdzv_timeout_s));
  }
  for (int n = 0; n < o.nnodes; ++n) {
    auto other = nlohmann::json::parse(text(store_->get(node_key(n))), nullptr, false);
    int nnodes = other.value("nnodes", -1), nproc = other.value("nproc", -1), restarts = other.value("max_restarts", -1);
    if (nnodes != o.nnodes || nproc != o.nproc || restarts != o.max_restarts)
      throw Error(fmt::format("run: node {} ({}) runs --nnodes {} --nproc {} --max-restarts {}, this node --nnodes {} "
                              "--nproc {} --max-restarts {}; every node needs the same values",
                              n, other.value("host", "?"), nnodes, nproc, restarts, o.nnodes, o.nproc,
                              o.max_restarts));
  }
}

void NodeRendezvous::report_failure(const std::string& message) {
  try {
    store_->compareSet(failed_key(), {}, bytes(fmt::format("node {}: {}", options_.node_rank, message)));
  } catch (const std::exception&) {
    // the store is gone with node 0: the other nodes learn of it from their own links
  }
}

std::optional<std::string> NodeRendezvous::failure_elsewhere(bool at_once) {
  auto now = std::chrono::steady_clock::now();
  if (now < next_check_ && !at_once) return std::nullopt;
  next_check_ = now + std::chrono::milliseconds(500);
  try {
    store_->add(fmt::format("beats/{}", options_.node_rank), 1);
    if (store_->check({failed_key()})) return text(store_->get(failed_key()));
    if (!server_) return std::nullopt;
    for (int n = 1; n < options_.nnodes; ++n) {
      if (store_->check({fmt::format("done/{}", n)})) continue;  // its ranks ended: it beats no more
      if (!store_->check({fmt::format("alive/{}", n)})) {
        lost_[n] = true;
        std::string message = fmt::format("node {} is lost: its launcher's connection closed (the launcher or its "
                                          "machine died)", n);
        report_failure(message);
        return message;
      }
      std::string key = fmt::format("beats/{}", n);
      int64_t count = store_->check({key}) ? std::stoll(text(store_->get(key))) : 0;
      if (count != beats_[n].first) beats_[n] = {count, now};
      auto silent = std::chrono::duration_cast<std::chrono::seconds>(now - beats_[n].second);
      if (silent >= silence_limit_) {
        lost_[n] = true;
        std::string message = fmt::format("node {} is lost: its launcher has not been heard from for {} s (a cut link "
                                          "or a dead machine; half of SLAPO_DIST_TIMEOUT, at least 5 s)",
                                          n, silent.count());
        report_failure(message);
        return message;
      }
    }
    return std::nullopt;
  } catch (const std::exception& e) {
    lost_[0] = true;
    return fmt::format("node 0 is lost: {} (a cut link, or node 0's launcher ended)", e.what());
  }
}

void NodeRendezvous::begin_attempt(int attempt) { attempt_ = attempt; }

bool NodeRendezvous::agree_to_restart(std::string& why) {
  for (int n = 0; n < options_.nnodes; ++n)
    if (lost_[n]) {
      why = fmt::format("no restart: node {} is lost, and the world of a run is fixed", n);
      return false;
    }
  auto key = [&](int n) { return fmt::format("attempts/{}/stopped/{}", attempt_, n); };
  try {
    store_->set(key(options_.node_rank), bytes("1"));
    std::vector<std::string> keys;
    for (int n = 0; n < options_.nnodes; ++n) keys.push_back(key(n));
    store_->wait(keys, std::max(silence_limit_, std::chrono::seconds(10)));
    return true;
  } catch (const std::exception& e) {
    std::vector<int> missing;
    for (int n = 0; n < options_.nnodes; ++n) {
      try {
        if (!store_->check({key(n)})) missing.push_back(n);
      } catch (const std::exception&) {
        why = fmt::format("no restart: node 0 is lost: {}", e.what());
        return false;
      }
    }
    why = fmt::format("no restart: node{} {} did not stop for it", missing.size() == 1 ? "" : "s",
                      fmt::join(missing, ", "));
    return false;
  }
}

void NodeRendezvous::finish(int timeout_s) {
  try {
    store_->set(fmt::format("done/{}", options_.node_rank), bytes("1"));
    if (!server_) return;
    std::vector<std::string> keys;
    for (int n = 0; n < options_.nnodes; ++n)
      if (!lost_[n]) keys.push_back(fmt::format("done/{}", n));
    store_->wait(keys, std::chrono::seconds(timeout_s));
  } catch (const std::exception&) {
    // a node that never says it finished has failed, and says so itself
  }
}

}  // namespace slapo
