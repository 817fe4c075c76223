// The key-value store a multi-node launch rendezvous through. Node 0's launcher serves it on the
// master address alone (LibTorch 1.13's TCPStore binds every interface and cannot be given a
// socket), it outlives the ranks, and its clients are StoreClient: the node launchers and,
// through c10d's Store interface, every rank's Gloo and NCCL groups.
#pragma once

#include <memory>
#include <string>

namespace slapo::dist {

class StoreServer {
 public:
  /// Listens on host:port (port 0: a free one) and serves on a thread of its own until destroyed.
  /// Throws Error when the address cannot be bound.
  StoreServer(const std::string& host, int port);
  ~StoreServer();
  StoreServer(const StoreServer&) = delete;
  StoreServer& operator=(const StoreServer&) = delete;

  int port() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace slapo::dist
