// How the launchers of a multi-node run find each other: node 0's launcher serves the store on
// the master address, every launcher claims its node rank there, and they agree on the world
// before any rank starts. Afterwards the store carries the first failure from node to node.
#pragma once

#include <memory>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "distributed/store_client.h"
#include "distributed/store_server.h"
#include "host/launcher.h"

namespace slapo {

class NodeRendezvous {
 public:
  /// Node 0 starts the store; every node claims its rank and waits (rdzv_timeout_s) for all the
  /// others. Throws Error naming what went wrong: the address, a rank taken twice, nodes that
  /// never came, nodes that disagree on --nnodes or --nproc.
  NodeRendezvous(const LaunchOptions& options, std::chrono::seconds silence_limit);

  /// Starts attempt `attempt` (0, then one per restart): failures are recorded per attempt.
  void begin_attempt(int attempt);
  /// After a failed attempt: waits for every node's launcher to have stopped its ranks too, so all
  /// start the next attempt together. False, with `why`, when a node is lost or never arrives.
  bool agree_to_restart(std::string& why);
  /// Records this node's failure for the others (the first one recorded wins).
  void report_failure(const std::string& message);
  /// Why this node must stop although its own ranks are well, or nothing while all is well: a
  /// failure another node recorded, node 0's store gone silent (a cut link, a dead node 0), or on
  /// node 0 a node whose launcher has been silent for `silence_limit` (recorded for the others).
  /// Every launcher beats through the store here; the supervisor calls it from its 100 ms loop and
  /// it talks to the store at most twice a second, unless `at_once`.
  std::optional<std::string> failure_elsewhere(bool at_once = false);
  /// Says this node's ranks have ended; node 0 waits (up to `timeout_s`) for every node not known
  /// lost to say so before its store goes, since ranks elsewhere may still be using it.
  void finish(int timeout_s);

 private:
  void meet();  // the rendezvous itself: claim this node's rank, wait for the others, compare

  LaunchOptions options_;
  std::unique_ptr<dist::StoreServer> server_;  // node 0 only
  c10::intrusive_ptr<dist::StoreClient> store_;
  std::chrono::seconds silence_limit_;
  int attempt_ = 0;
  std::string failed_key() const { return fmt::format("attempts/{}/failed", attempt_); }
  std::chrono::steady_clock::time_point next_check_;
  // node 0: each node's last heartbeat count and when it last changed
  std::vector<std::pair<int64_t, std::chrono::steady_clock::time_point>> beats_;
  std::vector<bool> lost_;
};

}  // namespace slapo
