// The dynamic-graph primitives. Each checks everything first and raises slapo::Error naming
// the primitive, the module path, the fault and the valid choices; only then it rewrites the
// module and appends one entry to the schedule log. A failed primitive changes nothing.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/schedule.h"

namespace slapo {

/// Where a call came from and how its arguments print in the log.
struct CallSite {
  std::string source;                 ///< "bert_schedule.lua:12"
  std::vector<std::string> lua_args;  ///< arguments as Lua source
};

/// replace(new_mod): puts `new_mod` in this module's slot of its parent. Requires: 1) the node
/// is not the root; 2) `new_mod` is not this module or one of its ancestors. Parameters the new
/// module shares with the old one keep their shard specs and annotations.
void replace(Schedule& sch, std::shared_ptr<Module> new_mod, const CallSite& site);

/// shard(param, axis): keeps this rank's slice of `param` along `axis` (the parameter keeps its
/// identity, so ties and optimizer references survive) and records the full shape. Requires:
/// 1) the parameter exists; 2) 0 <= axis < dim (negative axes count from the end); 3) the size
/// along axis divides by the group size; 4) the parameter is not sharded yet.
/// `groups` > 1: the axis holds that many equal sections (fused QKV) and each is split alike.
void shard(Schedule& sch, const std::string& param, int64_t axis, const CallSite& site, int groups = 1);
/// How parameter `param` of `sch`'s module is sharded: its own spec, else the spec of a tied
/// parameter (the same tensor) sharded elsewhere in the tree; none when it is whole.
c10::optional<ShardSpec> shard_spec_of(const Schedule& sch, const std::string& param);

/// BwdParams: the gradients of the module's own and its children's parameters are all-reduced
/// over the group (replicated weights that saw only this rank's part of the activations, as the
/// LayerNorms of Megatron's sequence parallelism).
enum class SyncMode { FwdPre, FwdPost, BwdPost, BwdParams };

/// What a sync does to the tensor it touches.
struct SyncOp {
  enum Kind { AllReduce, AllGather, ReduceScatter, Scatter, Reshard, Function } kind;
  int64_t axis = -1;                         ///< all_gather, reduce_scatter, scatter
  std::string scheme;                        ///< reshard: "RS->SR", ...
  /// all_gather: backward reduce-scatters the gradient instead of slicing it (sequence parallelism:
  /// the gathered tensor's users each hold a partial sum of its gradient)
  bool reduce_scatter_grad = false;
  std::vector<std::string> params;           ///< bwd_params: only these parameters (empty: all)
  std::function<Value(const Value&)> fn;     ///< a user function (Lua)
};

/// Parses "fwd_pre" | "fwd_post" | "bwd_post"; errors list the choices.
SyncMode parse_sync_mode(const std::string& mode, const Schedule& sch);
/// Parses "all_reduce" | "all_gather" | "reduce_scatter" | "scatter" | a reshard scheme.
/// What sync's op may be, for error messages.
extern const char* const kSyncOps;
SyncOp parse_sync_op(const std::string& op, int64_t axis, const Schedule& sch);

/// sync(mode, op): inserts a differentiable collective on the module's input (fwd_pre), output
/// (fwd_post), or on the gradient of its input (bwd_post: identity forward, op backward).
void sync(Schedule& sch, SyncMode mode, const SyncOp& op, const CallSite& site);

/// checkpoint(): the module keeps only its inputs in forward and runs again in backward, with the
/// CPU (and CUDA) generator states and the fork_rng streams of its subtree restored, so
/// gradients are bit-identical with dropout on. Requires: not the root, not checkpointed yet.
void checkpoint(Schedule& sch, const CallSite& site);

/// Installs checkpoint's recomputing call wrapper on `m` (checkpoint and checkpoint(subgraph)).
void make_checkpointed(Module& m, const std::string& where);

/// A subgraph as Lua passes it: the names of its nodes ("%x.3"); several matches (horizontal:
/// the q, k and v projections) are merged.
using SubgraphNames = std::vector<std::string>;

/// replace(new_mod, subgraph) on a traced module: `new_mod` becomes a child named
/// "<Type>_<n>" and one call of it takes the subgraph's place, fed the subgraph's inputs in the
/// order of first use; several outputs come back as a tuple, in graph order. Before rewriting,
/// the subgraph and `new_mod` run on the same random inputs: different results are an error that
/// names the input order that would match, if one does (SDPA's q, k, v swapped, say).
/// `check = false` skips that (for replacements that are meant to differ). `child_name` (non-empty)
/// names the child instead. A subgraph that calls a leaf with syncs or hooks is refused: they
/// would be dropped silently. Returns the name.
std::string replace_subgraph(Schedule& sch, std::shared_ptr<Module> new_mod, const SubgraphNames& nodes, bool check,
                             const CallSite& site, const std::string& child_name = "");

/// checkpoint(subgraph): the subgraph moves into a child "CheckPointWrapper_<n>" that recomputes
/// it in backward. Returns the child's name.
std::string checkpoint_subgraph(Schedule& sch, const SubgraphNames& nodes, const CallSite& site);

/// fuse(subgraph, {compiler = "kernels", name = "BiasGeLU"}): the subgraph moves into a child
/// "<name>_<n>" whose graph has the kernel patterns rewritten onto the fused kernels (at least
/// one must be found); compiler "torchscript" hands it to LibTorch's optimiser and fusers
/// instead. Returns the child's name.
std::string fuse_subgraph(Schedule& sch, const SubgraphNames& nodes, const std::string& compiler,
                          const std::string& name, const CallSite& site);

/// shard_experts: expert parallelism over `group` (default: the schedule's group) for a sparse MoE
/// block (MixtralSparseMoeBlock). Each rank keeps num_local_experts / |group| consecutive experts
/// (rank r: experts r x E/N ..), their parameters named as before; the router stays whole. Each
/// call sends every routed (token, slot) row to the rank of its expert by all-to-all and the
/// expert's output back, so no token is dropped; backward reverses both. The kept experts'
/// gradients come out averaged over the group as data parallelism's are (every rank's tokens
/// summed, divided by the group's size), so data-parallel averaging must leave them alone
/// (ModuleMeta::expert_group marks them). Errors name the module and the numbers.
void shard_experts(Schedule& sch, const std::shared_ptr<dist::Group>& group, const CallSite& site);

/// context_parallel: the root's sequence split over `group` (default: every rank). Each rank is
/// given the whole rows, keeps its tokens (load_balance: chunks r and 2N-1-r of 2N, else chunk r of
/// N), attends over every rank's keys by ring attention (dist::ring_attention) at the tokens'
/// global positions, and returns its tokens' logits, or the whole sequence's loss, whose gradient
/// averaging over the group (as data parallelism does) makes every rank's the one-process gradient.
/// GPT-2 and LLaMA-family models (their split_sequences say what else is refused).
struct ContextParallelOptions {
  std::shared_ptr<dist::Group> group;
  std::string method = "ring";
  bool load_balance = true;
  double score_mib = 32;  ///< the float32 scores a ring step computes at once, at most (rows in chunks)
};
void context_parallel(Schedule& sch, const ContextParallelOptions& options, const CallSite& site);

/// fork_rng(seed): the module draws random numbers from its own stream seeded with
/// seed (default: the default generator's seed) + 2718 + rank, swapped in around each call.
void fork_rng(Schedule& sch, int64_t seed, const CallSite& site);

/// fully_shard: fully sharded data parallelism over the schedule's group (FSDP2's fully_shard,
/// ZeRO-3). Each rank keeps 1/N of every parameter of the module's subtree not already sharded or
/// managed by a fully_shard below it: a slice along axis 0, recorded (ModuleMeta::fully_sharded)
/// so verify, save and clipping gather or count it as they do shard's slices. Each call of the
/// module all-gathers them first and drops the whole tensors after; backward reduce-scatters each
/// gradient, averaged over the group as data parallelism averages, onto the slice. An optimizer
/// built over the model then holds 1/N of its state too. With `reshard_after_forward` the whole
/// tensors autograd keeps for backward give their memory back when the call returns and are
/// gathered again when backward reaches the module. With `prefetch`, a unit's call starts the
/// all-gather of the unit called after it (the fully sharded modules below a fully sharded root,
/// in the tree's order) before its own compute, as FSDP2's forward prefetch; in backward, a unit's
/// gather starts that of the call which returned before it. With `overlap_reduce`, a unit's
/// reduce-scatters run while the backward of the unit before it computes, as FSDP2's do, and land
/// on the slices' .grad when that unit's start or backward ends; without, each waits in place.
/// Errors name the parameter whose first axis the group does not divide.
struct FullyShardOptions {
  bool reshard_after_forward = true;
  bool prefetch = true;
  bool overlap_reduce = true;
  std::shared_ptr<dist::Group> group;  ///< the data-parallel ranks; default: the schedule's group
};
void fully_shard(Schedule& sch, const FullyShardOptions& options, const CallSite& site);
/// Whole tensors prefetched so far in this process: `used` by the call they were gathered for,
/// `stale` dropped because their slice changed before that call; `backward`: calls whose gathers in
/// backward (after a reshard) a later call's backward had started (tests read these).
struct PrefetchCounts {
  int64_t used = 0, stale = 0, backward = 0;
  int64_t not_gathered_again = 0;  ///< whole tensors resharded after forward that backward does not read
};
PrefetchCounts fully_shard_prefetch_counts();
/// Chains fully sharded units for prefetch in the order given (a pipeline stage's calls): each
/// unit's call starts the next one's gathers, where no fully sharded root chained it already.
void chain_fully_shard_prefetch(const std::vector<const Module*>& call_order);
/// Fully sharded units whose backward sums the gradients over their group instead of averaging
/// them: replicas whose gradients are each its rows' part of the batch's (pipeline stage meshes).
void sum_fully_shard_gradients(const std::vector<const Module*>& units);

/// trace{inputs, leaves, flatten}: the module's forward becomes a traced graph (aten ops, its
/// parameters as inputs) run with autograd; leaves stay calls through their parent's slot.
/// flatten = false: the direct children are leaves; true: the named paths or types are. Raises on
/// data-dependent forwards (a value read into a number) rather than baking the value in.
/// recursive = true (Slapo's default): then each child that has children of its own, and is not
/// named in `leaves`, is traced the same way on inputs shaped like its call in that trace; all or
/// nothing (a child that cannot be traced leaves every module untraced and names the child), or
/// with `fallback` (Slapo's behaviour) such a child stays one call: returns the paths kept so.
std::vector<std::string> trace(Schedule& sch, const Values& inputs, const std::vector<std::string>& leaves,
                               bool flatten, const CallSite& site, bool recursive = false, bool fallback = false);

/// Example inputs shaped like `m`'s last call, for a trace of it: its leading tensors (random
/// for floating dtypes, zeros otherwise); trailing non-tensor arguments (an absent mask) are left
/// out. Raises naming `fn` and `where`, and saying to pass `option` instead, when the module has
/// not run, had no tensor argument, or had a non-tensor argument before a tensor.
Values examples_like_last_call(const Module& m, const std::string& where, const char* fn, const char* option);

/// find(regex) on a traced module: its call nodes whose leaf path matches.
std::vector<struct GraphNode> find_nodes(Schedule& sch, const std::string& pattern);

/// find(fn) on a traced module: the subgraphs matching the traced pattern function by dataflow.
/// `modules`: the pattern's functional activations also match calls of ReLU, SiLU, ... leaves.
std::vector<std::vector<struct GraphNode>> find_pattern(Schedule& sch, const std::function<Value(Values)>& fn,
                                                        int n_inputs, const Values& example_inputs = {},
                                                        bool modules = false);

/// decompose(): a Linear or Conv1D computes matmul, then the bias add, as separate ops, so a trace
/// exposes the bias add to fusion. Requires: a Linear or Conv1D, not decomposed yet.
void decompose(Schedule& sch, const CallSite& site);

/// fuse({compiler = "kernels"}): on a traced module, rewrites the known patterns into the fused
/// kernels of kernels.h. Returns how many subgraphs were fused; zero is an error naming the
/// patterns it looked for. compiler = "torchscript": LibTorch's graph passes over the whole
/// graph; returns how many nodes they removed.
int fuse(Schedule& sch, const std::string& compiler, const CallSite& site);

/// annotate(param, key, value): attaches metadata to a parameter; it survives replace, build and clone.
void annotate(Schedule& sch, const std::string& param, const std::string& key, const Value& value,
              const CallSite& site);

}  // namespace slapo
