#include "distributed/store_client.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>

#include "core/error.h"
#include "distributed/net_address.h"
#include "distributed/store_protocol.h"

namespace slapo::dist {

namespace proto = store_protocol;
using Clock = std::chrono::steady_clock;

namespace {

// The server answers a held request at its own deadline; this much more covers the trip back.
constexpr std::chrono::milliseconds kAnswerSlack{10000};

std::string key_list(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size() && i < 4; ++i) s += (i ? ", '" : "'") + keys[i] + "'";
  if (keys.size() > 4) s += fmt::format(" and {} more", keys.size() - 4);
  return s;
}

std::vector<proto::Field> key_fields(const std::vector<std::string>& keys) {
  std::vector<proto::Field> f;
  for (const auto& k : keys) f.push_back(proto::field(k));
  return f;
}

}  // namespace

StoreClient::StoreClient(std::string host, int port, std::chrono::milliseconds timeout)
    : c10d::Store(timeout), host_(std::move(host)), port_(port) {
  try {
    fd_ = connect_to(host_, port_, Clock::now() + timeout);
  } catch (const std::exception& e) {
    throw Error(fmt::format("store: {} (is node 0's launcher running there?)", e.what()));
  }
}

StoreClient::~StoreClient() {
  if (fd_ >= 0) ::close(fd_);
}

std::vector<proto::Field> StoreClient::request(uint8_t op, const std::vector<proto::Field>& fields,
                                               std::chrono::milliseconds wait_for, const std::string& what) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto lost = [&](const std::string& why) {
    return Error(fmt::format("store: lost the launcher's store at {}:{} during {}: {}", host_, port_, what, why));
  };
  if (fd_ < 0) throw lost("the connection was closed before");
  auto frame = proto::encode(op, fields);
  for (size_t sent = 0; sent < frame.size();) {
    ssize_t n = ::send(fd_, frame.data() + sent, frame.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      ::close(fd_), fd_ = -1;
      throw lost(std::strerror(errno));
    }
    sent += static_cast<size_t>(n);
  }
  // A held request may take as long as its own timeout (none: as long as it takes).
  bool forever = wait_for == c10d::Store::kNoTimeout && (op == uint8_t(proto::Op::Get) || op == uint8_t(proto::Op::Wait));
  auto deadline = Clock::now() + (wait_for.count() > 0 ? wait_for : std::chrono::milliseconds(0)) + kAnswerSlack;
  std::vector<uint8_t> in;
  for (;;) {
    bool complete = false;
    uint8_t head = 0;
    std::vector<proto::Field> answer;
    if (!proto::decode(in, complete, head, answer)) {
      ::close(fd_), fd_ = -1;
      throw lost("a malformed answer");
    }
    if (complete) {
      auto status = static_cast<proto::Status>(head);
      if (status == proto::Status::Ok) return answer;
      std::string message = answer.empty() ? "" : proto::text(answer[0]);
      if (status == proto::Status::Timeout)
        throw Error(fmt::format("store: timed out after {} s during {}", wait_for.count() / 1000.0, what));
      throw Error(fmt::format("store: the server refused {}: {}", what, message));
    }
    int left = forever ? 1000
                       : static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now())
                                              .count());
    if (left <= 0) {
      ::close(fd_), fd_ = -1;  // the answer may still come: this connection is out of step
      throw lost(fmt::format("no answer within {} s", (wait_for + kAnswerSlack).count() / 1000.0));
    }
    pollfd p{fd_, POLLIN, 0};
    int ready = ::poll(&p, 1, left);
    if (ready <= 0) continue;
    uint8_t chunk[65536];
    ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) {
      ::close(fd_), fd_ = -1;
      throw lost(n == 0 ? "the server closed the connection" : std::strerror(errno));
    }
    if (n > 0) in.insert(in.end(), chunk, chunk + n);
  }
}

void StoreClient::set(const std::string& key, const std::vector<uint8_t>& value) {
  request(uint8_t(proto::Op::Set), {proto::field(key), value}, {}, fmt::format("set('{}')", key));
}

void StoreClient::set_ephemeral(const std::string& key, const std::vector<uint8_t>& value) {
  request(uint8_t(proto::Op::SetEphemeral), {proto::field(key), value}, {}, fmt::format("set_ephemeral('{}')", key));
}

std::vector<uint8_t> StoreClient::compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                             const std::vector<uint8_t>& desired) {
  return request(uint8_t(proto::Op::CompareSet), {proto::field(key), expected, desired}, {},
                 fmt::format("compareSet('{}')", key))
      .at(0);
}

std::vector<uint8_t> StoreClient::get(const std::string& key) {
  return request(uint8_t(proto::Op::Get), {proto::field(std::to_string(timeout_.count())), proto::field(key)}, timeout_,
                 fmt::format("get('{}')", key))
      .at(0);
}

int64_t StoreClient::add(const std::string& key, int64_t value) {
  auto answer = request(uint8_t(proto::Op::Add), {proto::field(key), proto::field(std::to_string(value))}, {},
                        fmt::format("add('{}')", key));
  return std::stoll(proto::text(answer.at(0)));
}

bool StoreClient::deleteKey(const std::string& key) {
  return proto::text(request(uint8_t(proto::Op::Delete), {proto::field(key)}, {}, fmt::format("delete('{}')", key))
                         .at(0)) == "1";
}

bool StoreClient::check(const std::vector<std::string>& keys) {
  return proto::text(request(uint8_t(proto::Op::Check), key_fields(keys), {}, "check(" + key_list(keys) + ")").at(0)) ==
         "1";
}

int64_t StoreClient::getNumKeys() {
  return std::stoll(proto::text(request(uint8_t(proto::Op::NumKeys), {}, {}, "getNumKeys()").at(0)));
}

void StoreClient::wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

void StoreClient::wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) {
  auto fields = key_fields(keys);
  fields.insert(fields.begin(), proto::field(std::to_string(timeout.count())));
  request(uint8_t(proto::Op::Wait), fields, timeout, "wait(" + key_list(keys) + ")");
}

#if TORCH_VERSION_MAJOR >= 2
c10::intrusive_ptr<c10d::Store> StoreClient::clone() {
  return c10::make_intrusive<StoreClient>(host_, port_, timeout_);
}
#endif

}  // namespace slapo::dist
