// `slapo-lua run --nproc N [--nnodes M --node-rank R --master-addr A]`: a node's ranks as separate
// processes under one supervisor, as torchrun's agent.
#pragma once

#include <string>
#include <vector>

namespace slapo {

/// torchrun's names and meanings. One node (nnodes 1) rendezvous through a file and listens on no
/// network address; several meet at node 0's launcher, which serves the store on master_addr.
struct LaunchOptions {
  int nproc = 1;      ///< ranks on this node
  int nnodes = 1;
  int node_rank = 0;  ///< 0 .. nnodes - 1; node 0 serves the store
  std::string master_addr;  ///< node 0's address, as every node reaches it (several nodes only)
  int master_port = 29500;
  int rdzv_timeout_s = 300;  ///< how long a launcher waits for the other nodes to join
  int max_restarts = 0;      ///< after a failure, start every rank again this many times at most
  bool multi_node() const { return nnodes > 1; }
  /// Whether the ranks need a supervisor: several of them, or restarts to perform.
  bool needs_launcher() const { return nproc * nnodes > 1 || max_restarts > 0; }
};

/// Spawns the node's ranks (exec of this program with torchrun's environment), forwards their
/// output ("[rank k] " before lines of ranks other than 0), and when one fails stops the others
/// within seconds and prints the first failure once; with several nodes, a failure on one stops
/// every node. Returns the exit code. `command` is what each rank runs after the program name:
/// {"run", script, args...} or {"test", paths...}.
int launch_ranks(const LaunchOptions& options, const std::vector<std::string>& command);

/// Ends the launcher's process with `code`, its output flushed, without static destructors or
/// atexit handlers: the launcher holds nothing they would release, and built against pip's
/// LibTorch 2.11 (CUDA 13) its ordinary exit crashed (a call through a null pointer) after every
/// rank had passed (the H200 run, 2026-11-29). Ranks exit as usual (their process groups end then).
[[noreturn]] void end_launcher(int code);

/// A TCP port on the loopback interface that was free a moment ago (29500 when none can be found).
int free_port();

/// In a rank started by the launcher: where to record a failure instead of printing it.
void write_error_file(const std::string& path, int rank, const std::string& message);

}  // namespace slapo
