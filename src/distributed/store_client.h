// A rank's (or a node launcher's) connection to the multi-node launcher's StoreServer, as a c10d
// Store: Gloo and NCCL groups rendezvous through it exactly as through c10d's TCPStore.
#pragma once

#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/version.h>  // TORCH_VERSION_MAJOR: Store::clone on 2.x

#include <mutex>
#include <string>
#include <vector>

namespace slapo::dist {

class StoreClient : public c10d::Store {
 public:
  /// Connects to host:port, retrying until `timeout` has passed (the server may start later).
  StoreClient(std::string host, int port, std::chrono::milliseconds timeout);
  ~StoreClient() override;

  void set(const std::string& key, const std::vector<uint8_t>& value) override;
  std::vector<uint8_t> compareSet(const std::string& key, const std::vector<uint8_t>& expected,
                                  const std::vector<uint8_t>& desired) override;
  std::vector<uint8_t> get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t value) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t getNumKeys() override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;
#if TORCH_VERSION_MAJOR >= 2
  c10::intrusive_ptr<c10d::Store> clone() override;
#endif

  /// Sets a key that the server deletes when this connection closes: its absence says the
  /// process holding it has ended (or lost its link). Not part of c10d's Store.
  void set_ephemeral(const std::string& key, const std::vector<uint8_t>& value);

  const std::string& host() const { return host_; }
  int port() const { return port_; }

 private:
  // One request and its answer; `wait_for` is how long the server may take to answer (it holds a
  // Get or Wait until the keys exist), zero for requests it answers at once.
  std::vector<std::vector<uint8_t>> request(uint8_t op, const std::vector<std::vector<uint8_t>>& fields,
                                            std::chrono::milliseconds wait_for, const std::string& what);

  std::string host_;
  int port_;
  int fd_ = -1;
  std::mutex mutex_;
};

}  // namespace slapo::dist
