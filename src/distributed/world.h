// The process-wide distributed context: rendezvous (a FileStore on one node, the launcher's store
// across nodes, c10d's TCPStore under torchrun) with torchrun's
// environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT), the world group and sub-groups.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "distributed/group.h"

namespace slapo::dist {

struct WorldOptions {
  int rank = 0;
  int local_rank = 0;  ///< this rank's GPU under NCCL (LOCAL_RANK; RANK when unset)
  int world_size = 1;
  int local_world_size = 1;  ///< ranks on this node (LOCAL_WORLD_SIZE; the world when unset)
  int node_rank = 0;         ///< this node (GROUP_RANK; rank / local_world_size when unset)
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  /// SLAPO_STORE_FILE: rendezvous through c10d's FileStore at this path instead of a TCPStore at
  /// master_addr:master_port. The one-machine launcher sets it (in its private 0700 directory), so
  /// a local job listens on no network address.
  std::string store_file;
  /// SLAPO_LAUNCHER_STORE: rendezvous through the store a multi-node launcher serves at
  /// master_addr:master_port (on that address alone).
  bool launcher_store = false;
  int restart_count = 0;  ///< TORCHELASTIC_RESTART_COUNT: each attempt rendezvous under keys of its own
  /// TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent already serves the TCPStore at
  /// master_addr:master_port, so rank 0 joins it as a client instead of serving one.
  bool agent_store = false;
  std::chrono::milliseconds timeout{std::chrono::seconds(120)};  ///< store and collectives
  /// "auto": Gloo for CPU tensors, plus NCCL for CUDA tensors when this is a CUDA build and every
  /// rank has its own GPU; "gloo": Gloo only (CUDA tensors staged through the CPU); "nccl": NCCL
  /// only (CPU tensors staged through the GPU; one rank too).
  std::string backend = "auto";
};

/// SLAPO_DIST_TIMEOUT in seconds (default 120): how long the rendezvous and a collective may wait.
std::chrono::seconds timeout_from_env();
/// Reads torchrun's variables; a process without them is a world of one. SLAPO_DIST_TIMEOUT
/// (seconds) bounds the rendezvous and every collective, so a lost peer never hangs a run.
/// SLAPO_DIST_BACKEND picks auto (default), gloo or nccl.
WorldOptions options_from_env();

/// Joins the world (idempotent). With world_size 1 no store or process group is created, except
/// under SLAPO_DIST_BACKEND=nccl (a one-rank NCCL group, so one GPU runs NCCL's path). Where NCCL
/// is used, LOCAL_RANK's GPU becomes the current device.
void init(const WorldOptions& options);
bool initialized();
/// Leaves the world: every group's connections end (init registers this to run at exit, before
/// the CUDA runtime unloads: NCCL's communicators cannot end after it).
void shutdown();
/// What this process joined with (a world of one before any init).
const WorldOptions& options();
/// Where this rank's tensors go for its fastest collectives: "cuda:<LOCAL_RANK>" where the world
/// uses NCCL, else "cpu".
std::string device();

/// The world group (initialising a world of one when nothing was initialised).
std::shared_ptr<Group> world();
/// A sub-group of global `ranks`; every rank of the world must call it in the same order, as
/// with torch.distributed.new_group. On ranks outside it the group has rank -1.
std::shared_ptr<Group> new_group(const std::vector<int>& ranks);
/// A group by id (autograd collectives store ids in their saved state).
std::shared_ptr<Group> group_by_id(int id);

}  // namespace slapo::dist
