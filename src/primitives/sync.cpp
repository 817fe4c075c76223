// sync: insert a differentiable collective before or after a module.
#include <algorithm>

#include "core/error.h"
#include "distributed/autograd_collectives.h"
#include "distributed/group.h"
#include "primitives/primitives.h"

namespace slapo {

const char* const kSyncOps =
    "all_reduce, all_gather, reduce_scatter, scatter, a reshard scheme such as \"RS->SR\", or a function";

namespace {

const char* kModes = "fwd_pre, fwd_post, bwd_post, bwd_params";
const std::vector<std::string> kSchemes = {"RR->RR", "RR->RS", "RR->SR", "RS->RR", "RS->RS",
                                           "RS->SR", "SR->RR", "SR->RS", "SR->SR"};

// R/S layouts of the last two dims (Slapo's notation): "RS" = sharded along dim -1,
// "SR" = sharded along dim -2. Moves compose a gather and a slice, both differentiable.
at::Tensor reshard(const at::Tensor& x, const std::string& scheme, const std::shared_ptr<dist::Group>& g) {
  std::string from = scheme.substr(0, 2), to = scheme.substr(4, 2);
  auto sharded_dim = [](const std::string& layout) -> int64_t {
    if (layout == "RS") return -1;
    if (layout == "SR") return -2;
    return 0;
  };
  if (from == to) return x;
  at::Tensor y = x;
  if (from != "RR") y = dist::gather_from_group(y, sharded_dim(from), g);
  if (to != "RR") y = dist::scatter_to_group(y, sharded_dim(to), g);
  return y;
}

// the collectives that split or join along an axis
bool takes_axis(const SyncOp& op) {
  return op.kind == SyncOp::AllGather || op.kind == SyncOp::ReduceScatter || op.kind == SyncOp::Scatter;
}

at::Tensor apply_forward(const SyncOp& op, const at::Tensor& x, const std::shared_ptr<dist::Group>& g) {
  switch (op.kind) {
    case SyncOp::AllReduce: return dist::reduce_from_group(x, g);
    case SyncOp::AllGather:
      return op.reduce_scatter_grad ? dist::gather_sequence_from_group(x, op.axis, g)
                                    : dist::gather_from_group(x, op.axis, g);
    case SyncOp::ReduceScatter: return dist::reduce_scatter_to_group(x, op.axis, g);
    case SyncOp::Scatter: return dist::scatter_to_group(x, op.axis, g);
    case SyncOp::Reshard: return reshard(x, op.scheme, g);
    case SyncOp::Function: break;
  }
  return x;
}

Value transform(const SyncOp& op, const Value& v, const std::shared_ptr<dist::Group>& g, bool backward,
                const std::string& where, const char* mode) {
  if (op.kind == SyncOp::Function) return op.fn(v);
  if (!v.isTensor())
    throw Error(fmt::format("sync({}) on {}: expected a tensor to synchronise, got {}", mode, where, v.tagKind()));
  if (backward) return dist::copy_to_group(v.toTensor(), g);
  // the tensor's rank is known only now: name the sync, not the collective, when the axis is off
  const at::Tensor& x = v.toTensor();
  if (takes_axis(op) && (op.axis < -x.dim() || op.axis >= x.dim()))
    throw Error(fmt::format("sync({}) on {}: axis {} is out of range for the module's {}-d {} (valid: {} .. {})", mode,
                            where, op.axis, x.dim(), std::string(mode) == "fwd_post" ? "output" : "input", -x.dim(),
                            x.dim() - 1));
  return apply_forward(op, x, g);
}

}  // namespace

SyncMode parse_sync_mode(const std::string& mode, const Schedule& sch) {
  if (mode == "fwd_pre") return SyncMode::FwdPre;
  if (mode == "fwd_post") return SyncMode::FwdPost;
  if (mode == "bwd_post") return SyncMode::BwdPost;
  if (mode == "bwd_params") return SyncMode::BwdParams;
  throw Error(fmt::format("sync: unknown mode '{}' for {} (choices: {})", mode, sch.where(), kModes));
}

SyncOp parse_sync_op(const std::string& op, int64_t axis, const Schedule& sch) {
  SyncOp out;
  out.kind = SyncOp::AllReduce;
  out.axis = axis;
  bool needs_axis = true;
  if (op == "all_reduce") out.kind = SyncOp::AllReduce, needs_axis = false;
  else if (op == "all_gather") out.kind = SyncOp::AllGather;
  else if (op == "reduce_scatter") out.kind = SyncOp::ReduceScatter;
  else if (op == "scatter") out.kind = SyncOp::Scatter;
  else if (std::find(kSchemes.begin(), kSchemes.end(), op) != kSchemes.end())
    out.kind = SyncOp::Reshard, out.scheme = op, needs_axis = false;
  else
    throw Error(fmt::format("sync: unknown op '{}' for {} (choices: {}; schemes: {})", op, sch.where(), kSyncOps,
                            join_or_none(kSchemes)));
  if (needs_axis && axis == INT64_MIN)
    throw Error(fmt::format("sync: op '{}' for {} needs an axis: sync(mode, \"{}\", {{axis = N}})", op, sch.where(), op));
  return out;
}

void sync(Schedule& sch, SyncMode mode, const SyncOp& op, const CallSite& site) {
  // Step 1. Checks.
  if (mode == SyncMode::BwdPost && op.kind != SyncOp::AllReduce)
    throw Error(fmt::format("sync: mode 'bwd_post' on {} all-reduces the input gradient; op must be 'all_reduce'",
                            sch.where()));
  if (mode == SyncMode::BwdParams && op.kind != SyncOp::AllReduce)
    throw Error(fmt::format("sync: mode 'bwd_params' on {} all-reduces parameter gradients; op must be 'all_reduce'",
                            sch.where()));
  auto group = sch.group();
  std::string where = sch.where();
  // an input's rank is known once the module has run; an output's only at the next forward
  const auto& last = sch.mod()->last_call();
  if (mode == SyncMode::FwdPre && takes_axis(op) && !last.empty()) {
    auto rank = static_cast<int64_t>(last[0].shape.size());
    if (op.axis < -rank || op.axis >= rank)
      throw Error(fmt::format("sync: axis {} for {} is out of range for its {}-d input (its last call; valid: {} .. {})",
                              op.axis, where, rank, -rank, rank - 1));
  }
  if (op.reduce_scatter_grad && (op.kind != SyncOp::AllGather || mode == SyncMode::BwdPost))
    throw Error(fmt::format("sync: {{grad = \"reduce_scatter\"}} on {} belongs to a fwd_pre or fwd_post all_gather", where));
  if (!op.params.empty() && mode != SyncMode::BwdParams)
    throw Error(fmt::format("sync: {{params = ...}} on {} names the parameters of a bwd_params sync", where));
  if (mode == SyncMode::BwdParams) {
    // A sharded parameter's gradient is this rank's slice already: summing slices is wrong.
    auto sharded = shard_specs_by_tensor(*sch.mod());
    auto params = unique_named_parameters(*sch.mod());
    if (!op.params.empty()) {  // only the named ones (a row-parallel projection's whole bias)
      decltype(params) chosen;
      std::vector<std::string> names;
      for (auto& [name, p] : params) names.push_back(name);
      for (auto& wanted : op.params) {
        auto found = std::find_if(params.begin(), params.end(), [&](const auto& item) { return item.first == wanted; });
        if (found == params.end())
          throw Error(fmt::format("sync: mode 'bwd_params' on {}: no parameter '{}' (valid: {})", where, wanted,
                                  join_or_none(names)));
        chosen.push_back(*found);
      }
      params = std::move(chosen);
    }
    for (auto& [name, p] : params)
      if (sharded.count(p.unsafeGetTensorImpl()))
        throw Error(fmt::format("sync: mode 'bwd_params' on {}: '{}' is sharded, so its gradient is this rank's "
                                "slice; sync the replicated parameters' modules only", where, name));
    if (params.empty())
      throw Error(fmt::format("sync: mode 'bwd_params' on {}: the module has no parameters", where));
    // Step 2. A gradient hook per parameter: the summed gradient of every rank's part.
    for (auto& [name, p] : params)
      if (p.requires_grad())
        p.register_hook([group](const at::Tensor& grad) {
          if (!group || group->size() <= 1) return grad;
          at::Tensor sum = grad.clone();
          group->all_reduce(sum, "sync(bwd_params)");
          return sum;
        });
    sch.log().append({"sync", sch.path(), site.lua_args, site.source});
    return;
  }
  // Step 2. Install the hook.
  if (mode == SyncMode::FwdPost) {
    sch.mod()->add_forward_post_hook([op, group, where](Module&, const Values&, Value& out) {
      out = transform(op, out, group, false, where, "fwd_post");
    });
  } else {
    bool backward = mode == SyncMode::BwdPost;
    const char* name = backward ? "bwd_post" : "fwd_pre";
    sch.mod()->add_forward_pre_hook([op, group, where, backward, name](Module&, Values& args) {
      if (args.empty()) throw Error(fmt::format("sync({}) on {}: the module was called without inputs", name, where));
      args[0] = transform(op, args[0], group, backward, where, name);
    });
  }
  // Step 3. Log.
  sch.log().append({"sync", sch.path(), site.lua_args, site.source});
}

}  // namespace slapo
