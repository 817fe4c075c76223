#include "distributed/store_server.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <list>
#include <map>
#include <optional>
#include <thread>

#include "core/error.h"
#include "distributed/net_address.h"
#include "distributed/store_protocol.h"

namespace slapo::dist {

namespace proto = store_protocol;
using Clock = std::chrono::steady_clock;

namespace {

struct Connection {
  int fd = -1;
  std::vector<uint8_t> in, out;
  // A Get or Wait whose keys are not all there yet: answered when they are, or at the deadline.
  bool parked = false;
  proto::Op parked_op = proto::Op::Wait;
  std::vector<std::string> parked_keys;
  std::optional<Clock::time_point> deadline;  // none: waits as long as it takes
  std::vector<std::string> ephemeral;         // keys that go with this connection
  bool closed = false;
};

std::optional<Clock::time_point> deadline_after(const proto::Field& ms_text) {
  long long ms = std::stoll(proto::text(ms_text));
  if (ms <= 0) return std::nullopt;  // c10d's kNoTimeout
  return Clock::now() + std::chrono::milliseconds(ms);
}

}  // namespace

struct StoreServer::Impl {
  int listen_fd = -1;
  int wake[2] = {-1, -1};  // the destructor writes here to end the serving loop
  int port = 0;
  std::map<std::string, std::vector<uint8_t>> data;
  std::list<Connection> connections;
  std::thread thread;

  void reply(Connection& c, proto::Status status, const std::vector<proto::Field>& fields = {}) {
    auto frame = proto::encode(static_cast<uint8_t>(status), fields);
    c.out.insert(c.out.end(), frame.begin(), frame.end());
  }

  bool present(const std::vector<std::string>& keys) const {
    for (const auto& k : keys)
      if (!data.count(k)) return false;
    return true;
  }

  // Answers a parked request once its keys are there (or its time is up).
  void settle(Connection& c) {
    if (!c.parked) return;
    if (present(c.parked_keys)) {
      c.parked = false;
      if (c.parked_op == proto::Op::Get) reply(c, proto::Status::Ok, {data[c.parked_keys[0]]});
      else reply(c, proto::Status::Ok);
    } else if (c.deadline && Clock::now() >= *c.deadline) {
      c.parked = false;
      reply(c, proto::Status::Timeout);
    }
  }

  void handle(Connection& c, proto::Op op, const std::vector<proto::Field>& f) {
    auto need = [&](size_t n) {
      if (f.size() < n) throw Error(fmt::format("request {} has {} fields, needs {}", int(op), f.size(), n));
    };
    switch (op) {
      case proto::Op::Set:
        need(2);
        data[proto::text(f[0])] = f[1];
        reply(c, proto::Status::Ok);
        break;
      case proto::Op::SetEphemeral:
        need(2);
        data[proto::text(f[0])] = f[1];
        c.ephemeral.push_back(proto::text(f[0]));
        reply(c, proto::Status::Ok);
        break;
      case proto::Op::Get:
      case proto::Op::Wait: {
        need(op == proto::Op::Get ? 2 : 1);
        c.parked = true;
        c.parked_op = op;
        c.parked_keys.clear();
        for (size_t i = 1; i < f.size(); ++i) c.parked_keys.push_back(proto::text(f[i]));
        c.deadline = deadline_after(f[0]);
        settle(c);
        break;
      }
      case proto::Op::Add: {
        need(2);
        std::string key = proto::text(f[0]);
        long long sum = std::stoll(proto::text(f[1]));
        auto it = data.find(key);
        if (it != data.end()) sum += std::stoll(proto::text(it->second));
        data[key] = proto::field(std::to_string(sum));
        reply(c, proto::Status::Ok, {proto::field(std::to_string(sum))});
        break;
      }
      case proto::Op::CompareSet: {
        // c10d's meaning: set `desired` when the value is `expected` (a missing key matches an
        // empty `expected`); answer what the key holds afterwards, or `expected` when it is missing.
        need(3);
        std::string key = proto::text(f[0]);
        auto it = data.find(key);
        if (it == data.end()) {
          if (f[1].empty()) data[key] = f[2];
          reply(c, proto::Status::Ok, {f[1].empty() ? f[2] : f[1]});
        } else {
          if (it->second == f[1]) it->second = f[2];
          reply(c, proto::Status::Ok, {it->second});
        }
        break;
      }
      case proto::Op::Check: {
        std::vector<std::string> keys;
        for (const auto& k : f) keys.push_back(proto::text(k));
        reply(c, proto::Status::Ok, {proto::field(present(keys) ? "1" : "0")});
        break;
      }
      case proto::Op::Delete:
        need(1);
        reply(c, proto::Status::Ok, {proto::field(data.erase(proto::text(f[0])) ? "1" : "0")});
        break;
      case proto::Op::NumKeys:
        reply(c, proto::Status::Ok, {proto::field(std::to_string(data.size()))});
        break;
      default:
        throw Error(fmt::format("unknown request {}", int(op)));
    }
  }

  // Reads what the connection sent and answers every whole request in it.
  void receive(Connection& c) {
    uint8_t chunk[65536];
    ssize_t n = ::recv(c.fd, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
      c.closed = true;
      return;
    }
    if (n > 0) c.in.insert(c.in.end(), chunk, chunk + n);
    while (!c.parked && !c.closed) {
      bool complete = false;
      uint8_t head = 0;
      std::vector<proto::Field> fields;
      if (!proto::decode(c.in, complete, head, fields)) c.closed = true;  // not a store client
      if (!complete) break;
      try {
        handle(c, static_cast<proto::Op>(head), fields);
      } catch (const std::exception& e) {
        reply(c, proto::Status::Error, {proto::field(e.what())});
      }
    }
  }

  void send_pending(Connection& c) {
    while (!c.out.empty() && !c.closed) {
      ssize_t n = ::send(c.fd, c.out.data(), c.out.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
      if (n > 0) {
        c.out.erase(c.out.begin(), c.out.begin() + n);
      } else {
        if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
        c.closed = true;
      }
    }
  }

  int poll_timeout_ms() const {
    int ms = 1000;
    for (const auto& c : connections)
      if (c.parked && c.deadline) {
        auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*c.deadline - Clock::now()).count();
        ms = std::min<int>(ms, static_cast<int>(std::max<long long>(left + 1, 0)));
      }
    return ms;
  }

  void serve() {
    for (;;) {
      std::vector<pollfd> fds{{wake[0], POLLIN, 0}, {listen_fd, POLLIN, 0}};
      for (const auto& c : connections)
        fds.push_back({c.fd, static_cast<short>(POLLIN | (c.out.empty() ? 0 : POLLOUT)), 0});
      ::poll(fds.data(), fds.size(), poll_timeout_ms());
      if (fds[0].revents) return;
      if (fds[1].revents & POLLIN) {
        int fd = ::accept4(listen_fd, nullptr, nullptr, SOCK_CLOEXEC);
        if (fd >= 0) {
          connections.emplace_back();
          connections.back().fd = fd;
        }
      }
      size_t i = 2;
      for (auto& c : connections) {
        if (i < fds.size() && fds[i].fd == c.fd && (fds[i].revents & (POLLIN | POLLHUP | POLLERR))) receive(c);
        ++i;
      }
      for (auto& c : connections) settle(c);  // a write may have completed a wait; a deadline may be past
      for (auto& c : connections) send_pending(c);
      for (auto it = connections.begin(); it != connections.end();) {
        if (it->closed) {
          for (const auto& key : it->ephemeral) data.erase(key);
          ::close(it->fd);
          it = connections.erase(it);
        } else {
          ++it;
        }
      }
    }
  }
};

StoreServer::StoreServer(const std::string& host, int port) : impl_(std::make_unique<Impl>()) {
  impl_->listen_fd = listen_on(host, port);
  impl_->port = bound_port(impl_->listen_fd);
  if (::pipe2(impl_->wake, O_CLOEXEC) != 0) {
    ::close(impl_->listen_fd);
    throw Error("store: cannot create the server's wake-up pipe");
  }
  impl_->thread = std::thread([impl = impl_.get()] { impl->serve(); });
}

StoreServer::~StoreServer() {
  char byte = 0;
  (void)!::write(impl_->wake[1], &byte, 1);
  impl_->thread.join();
  for (auto& c : impl_->connections) ::close(c.fd);
  ::close(impl_->listen_fd);
  ::close(impl_->wake[0]);
  ::close(impl_->wake[1]);
}

int StoreServer::port() const { return impl_->port; }

}  // namespace slapo::dist
