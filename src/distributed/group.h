// A group of ranks and its collectives over c10d (Gloo for CPU tensors, NCCL for CUDA tensors).
// One-rank groups need no process group, so every script also runs alone. Collectives Gloo lacks in LibTorch 1.13
// (reduce_scatter, flat all_gather) are emulated here and nowhere else.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "distributed/backend.h"


namespace slapo::dist {

/// What this process's all-to-all exchanges (shard_experts' dispatch, forward and backward) have
/// cost since it started: calls, bytes sent, and seconds spent in them (on CPU the exchange itself;
/// under NCCL the host's share, the GPU running the exchange on its stream).
struct ExchangeTotals {
  int64_t calls = 0, bytes = 0;
  double seconds = 0;
};
ExchangeTotals all_to_all_totals();

/// Above this many bytes, a reduce-scatter (an all-reduce and a slice) or an all-gather on Gloo goes
/// in chunks: both hold a whole-size buffer of their own beside the caller's tensors.
constexpr int64_t kGlooChunkBytes = int64_t(32) << 20;

class Group {
 public:
  /// `rank` is this process's rank inside the group, -1 when it is not a member. `cpu` (Gloo) takes
  /// CPU tensors and `cuda` (NCCL) CUDA tensors; a tensor whose backend is missing is staged
  /// through the other's device, so host-side numbers (a loss, a norm, a flag) work under NCCL
  /// alone and CUDA tensors under Gloo alone. No backend: one rank, collectives are the identity.
  /// `device`: where the group's fastest backend takes tensors (this rank's GPU with NCCL).
  Group(int id, int rank, std::vector<int> global_ranks, c10::intrusive_ptr<CollectiveBackend> cpu,
        c10::intrusive_ptr<CollectiveBackend> cuda = {}, at::Device device = at::kCPU);

  int id() const { return id_; }
  int rank() const { return rank_; }
  int size() const { return static_cast<int>(ranks_.size()); }
  bool contains_me() const { return rank_ >= 0; }
  const std::vector<int>& ranks() const { return ranks_; }  ///< global ranks, in group order
  std::string describe() const;                              ///< "group 1 (ranks 0, 2)"
  at::Device device() const { return device_; }

  /// Sum over the group, in place; returns t.
  at::Tensor& all_reduce(at::Tensor& t, const char* caller = "all_reduce");
  /// Starts a sum over the group into the contiguous tensor `t` and returns at once; calling the
  /// returned function waits for it (and copies back a tensor staged from another device). Every
  /// rank must start the same collectives in the same order.
  std::function<void()> all_reduce_async(at::Tensor t, const char* caller = "all_reduce");
  /// Every rank's tensor concatenated along `dim`, in rank order.
  at::Tensor all_gather(const at::Tensor& t, int64_t dim, const char* caller = "all_gather");
  /// Every rank's tensor, in rank order, on t's device (all_gather without the concatenation).
  std::vector<at::Tensor> all_gather_slices(const at::Tensor& t, const char* caller = "all_gather");
  /// Every rank's tensor concatenated along dim 0 into `out` (contiguous, size() times t's rows),
  /// each rank's part written in place (fully_shard gathers parameters with it). Gloo gathers into
  /// a buffer of its own and copies out: above kGlooChunkBytes the rows go in chunks, so that
  /// buffer is a chunk, not a second whole tensor. Returns out.
  at::Tensor& all_gather_into(at::Tensor& out, const at::Tensor& t, const char* caller = "all_gather");
  /// all_gather_into, started: returns the wait, after which `out` holds every rank's slice (both
  /// tensors stay alive until then). Where the gather is staged (one rank, another device or dtype)
  /// it completes before this returns.
  std::function<void()> all_gather_into_async(at::Tensor out, const at::Tensor& t,
                                              const char* caller = "all_gather");
  /// Rows of t sent to each rank (send_rows[r] rows to rank r, in order along dim 0) and the rows
  /// each rank sends here (recv_rows[r] from rank r), concatenated in rank order: c10d's
  /// all-to-all with split sizes. The counts must agree between the ranks.
  at::Tensor all_to_all(const at::Tensor& t, const std::vector<int64_t>& send_rows,
                        const std::vector<int64_t>& recv_rows, const char* caller = "all_to_all");
  /// Copies `src`'s tensor (group-local rank) into t on every rank; returns t.
  at::Tensor& broadcast(at::Tensor& t, int src, const char* caller = "broadcast");
  /// The sum over the group, split along `dim`; this rank's part (emulated: all_reduce + narrow).
  at::Tensor reduce_scatter(const at::Tensor& t, int64_t dim, const char* caller = "reduce_scatter");
  /// reduce_scatter along dim 0, started: returns the wait, which gives this rank's part (a tensor
  /// of its own, not a view of the whole sum) and frees the whole sum; call it once. t's rows must
  /// divide evenly among the ranks. On Gloo a tensor above kGlooChunkBytes is reduced
  /// before this returns, in chunks of that size: the part and a chunk, never a whole copy.
  std::function<at::Tensor()> reduce_scatter_async(const at::Tensor& t, const char* caller = "reduce_scatter");
  /// This rank's part of t split evenly along `dim` (no communication).
  at::Tensor local_slice(const at::Tensor& t, int64_t dim, const char* caller = "scatter") const;
  void barrier();
  /// Ends the backends' connections now (NCCL's communicators while CUDA is still up, as
  /// destroy_process_group does); the group takes no collective after.
  void shutdown();
  /// Raises on every rank alike unless every rank of the group makes the same call: collective
  /// `caller` on a tensor of the same dtype and shape (`t` undefined: none), with the same `arg`
  /// (a dim or a root). Costs one small all-gather. Lua's collectives check first, so ranks that
  /// disagree (keys visited with pairs(), whose order differs between processes) get an error
  /// that names each rank's call, where Gloo would abort the process.
  void check_same_call(const char* caller, const at::Tensor& t, int64_t arg = 0);

  /// Point-to-point (group-local ranks), on tensors already on device(). `send` returns at once and keeps the tensor until
  /// `wait_sends`, so two ranks sending to each other cannot deadlock; `recv` fills `t` (its shape
  /// and dtype must match the sender's) and waits. Messages between two ranks match by tag.
  void send(const at::Tensor& t, int dst, int tag, const char* caller = "send");
  void recv(at::Tensor& t, int src, int tag, const char* caller = "recv");
  void wait_sends();

 private:
  void check_member(const char* caller) const;
  at::Tensor reduce_scatter_in_chunks(const at::Tensor& t, const char* caller);
  struct Route {
    CollectiveBackend* backend;  // null: no communication (one rank)
    at::Device device;           // where that backend takes its tensors
    /// Gloo (1.13) reduces, gathers and broadcasts no bfloat16: such tensors travel as float32
    bool widen_bf16 = false;
  };
  Route route(const at::Tensor& t) const;

  int id_;
  int rank_;
  std::vector<int> ranks_;
  c10::intrusive_ptr<CollectiveBackend> cpu_, cuda_;
  at::Device device_;
  struct PendingSends;
  std::shared_ptr<PendingSends> pending_;
};

}  // namespace slapo::dist
