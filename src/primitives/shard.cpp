// shard: keep this rank's slice of a parameter.
#include "core/error.h"
#include "distributed/group.h"
#include "primitives/primitives.h"

namespace slapo {

namespace {

std::vector<std::string> param_names(const Module& m) { return m.named_parameters(/*recurse=*/false).keys(); }

// A parameter, or a buffer (BatchNorm's running statistics shard with its channels).
at::Tensor param_or_buffer(const Module& m, const std::string& name) {
  if (m.has_param(name)) return m.param(name);
  auto buffers = m.named_buffers(/*recurse=*/false);
  if (auto* b = buffers.find(name)) return *b;
  return at::Tensor();
}

// Where a tensor tied to `t` (the same tensor under another module, as GPT-2's wte and lm_head)
// was sharded: "path.param" and its spec, or none.
struct TiedShard {
  std::string where;
  ShardSpec spec;
};
c10::optional<TiedShard> tied_shard(const Schedule& sch, const at::Tensor& t) {
  auto root = sch.shared_from_this();
  while (root->parent()) root = root->parent();
  auto nodes = root->named_schedules();
  nodes.insert(nodes.begin(), {"", std::const_pointer_cast<Schedule>(root)});
  for (auto& [path, node] : nodes)
    for (auto& [name, spec] : node->mod()->meta().shards)
      if (param_or_buffer(*node->mod(), name).unsafeGetTensorImpl() == t.unsafeGetTensorImpl())
        return TiedShard{(path.empty() ? "" : path + ".") + name, spec};
  return c10::nullopt;
}

}  // namespace

c10::optional<ShardSpec> shard_spec_of(const Schedule& sch, const std::string& param) {
  const Module& m = *sch.mod();
  auto own = m.meta().shards.find(param);
  if (own != m.meta().shards.end()) return own->second;
  if (!m.has_param(param)) return c10::nullopt;
  if (auto tied = tied_shard(sch, m.param(param))) return tied->spec;
  return c10::nullopt;
}

void shard(Schedule& sch, const std::string& param, int64_t axis, const CallSite& site, int groups) {
  Module& m = *sch.mod();
  // Step 1. The parameter.
  at::Tensor t = param_or_buffer(m, param);
  if (!t.defined()) {
    auto names = param_names(m);
    for (auto& b : m.named_buffers(/*recurse=*/false).keys()) names.push_back(b);
    auto close = closest_names(param, names);
    throw Error(fmt::format("shard: {} ({}) has no parameter '{}'{}; its parameters are: {}", sch.where(),
                            m.type_name(), param, close.empty() ? "" : fmt::format(" (did you mean '{}'?)", close[0]),
                            join_or_none(names)));
  }
  if (t.dim() == 0)
    throw Error(fmt::format("shard: '{}' of {} is a scalar; there is no axis to split", param, sch.where()));
  // Step 2. The axis.
  int64_t dims = t.dim();
  if (axis < -dims || axis >= dims)
    throw Error(fmt::format("shard: axis {} is out of range for '{}' of {} with shape [{}] (valid: 0 .. {})", axis, param,
                            sch.where(), fmt::join(t.sizes(), ", "), dims - 1));
  if (axis < 0) axis += dims;
  // Step 3. Not sharded before.
  if (m.meta().fully_sharded.count(param))
    throw Error(fmt::format("shard: '{}' of {} is fully sharded (fully_shard keeps 1/N of it along axis 0)", param,
                            sch.where()));
  auto done = m.meta().shards.find(param);
  if (done != m.meta().shards.end())
    throw Error(fmt::format("shard: '{}' of {} is already sharded along axis {}; a parameter is sharded once",
                            param, sch.where(), done->second.axis));
  // Step 3b. A tied parameter is one tensor: sharding it is one decision. Its tie was already
  // split; the same axis records the spec here too (nothing is split twice), another axis is refused.
  if (auto tied = tied_shard(sch, t)) {
    if (tied->spec.axis != axis || tied->spec.groups != groups)
      throw Error(fmt::format("shard: '{}' of {} is tied to '{}', already sharded along axis {}{}; a tied parameter "
                              "is sharded once, so shard it along axis {} here too or not at all",
                              param, sch.where(), tied->where, tied->spec.axis,
                              tied->spec.groups > 1 ? fmt::format(" in {} groups", tied->spec.groups) : "",
                              tied->spec.axis));
    m.meta().shards[param] = tied->spec;
    sch.log().append({"shard", sch.path(), site.lua_args, site.source});
    return;
  }
  // Step 4. Divisible.
  int parts = sch.group()->size();
  if (groups < 1)
    throw Error(fmt::format("shard: groups must be at least 1 for '{}' of {}, got {}", param, sch.where(), groups));
  if (t.size(axis) % groups != 0)
    throw Error(fmt::format("shard: cannot split '{}' of {} along axis {} into {} sections: size {} is not divisible by {}",
                            param, sch.where(), axis, groups, t.size(axis), groups));
  if ((t.size(axis) / groups) % parts != 0)
    throw Error(fmt::format("shard: cannot split '{}' of {} along axis {}: size {}{} is not divisible by world size {}",
                            param, sch.where(), axis, t.size(axis) / groups,
                            groups > 1 ? fmt::format(" (each of {} sections)", groups) : "", parts));
  // Step 5. Keep this rank's slice in the same tensor object (ties and references survive).
  ShardSpec spec{axis, t.sizes().vec(), parts, sch.group()->rank(), groups, sch.group()->id()};
  {
    torch::NoGradGuard no_grad;
    t.set_data(spec.local(t).clone());
    // A full-size .grad, or a gradient accumulator cached by a graph still alive (a loss kept
    // from an earlier step), would clash with the new shape in the next backward.
    t.mutable_grad() = at::Tensor();
    if (auto* meta = torch::autograd::impl::get_autograd_meta(t)) meta->grad_accumulator_.reset();
  }
  m.meta().shards[param] = spec;
  // Step 6. Log.
  sch.log().append({"shard", sch.path(), site.lua_args, site.source});
}

}  // namespace slapo
