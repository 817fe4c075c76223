// fully_shard: each rank keeps 1/N of a subtree's parameters; calls gather them, backward
// reduce-scatters their gradients.
#include <torch/csrc/autograd/custom_function.h>

#include <unordered_map>

#include "core/error.h"
#include "dist/group.h"
#include "dist/world.h"
#include "primitives/primitives.h"

namespace slapo {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The whole parameter from every rank's slice along axis 0; backward gives each slice its part
// of the gradient summed over the group and divided by its size: the data-parallel average.
struct GatherSlices : public torch::autograd::Function<GatherSlices> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& slice, int64_t group) {
    ctx->saved_data["group"] = group;
    return dist::group_by_id(static_cast<int>(group))->all_gather(slice.detach(), 0, "fully_shard");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto group = dist::group_by_id(static_cast<int>(ctx->saved_data["group"].toInt()));
    at::Tensor part = group->reduce_scatter(grads[0].contiguous(), 0, "fully_shard (backward)");
    return {part.div_(group->size()), at::Tensor()};
  }
};

// The modules whose parameters a fully_shard at `root` manages, with their paths below it: its
// subtree without the subtrees of fully_shard roots below it.
std::vector<std::pair<std::string, Module*>> managed_modules(Module& root) {
  std::vector<std::pair<std::string, Module*>> out;
  std::vector<std::string> nested;  // path prefixes of fully_shard roots below
  for (auto& item : root.named_modules("", /*include_self=*/true)) {
    const std::string& path = item.key();
    auto* m = dynamic_cast<Module*>(item.value().get());
    if (!m) continue;
    bool inside = std::any_of(nested.begin(), nested.end(),
                              [&](const std::string& p) { return path.rfind(p + ".", 0) == 0; });
    if (inside) continue;
    if (!path.empty() && m->meta().fully_shard_root) {
      nested.push_back(path);
      continue;
    }
    out.emplace_back(path, m);
  }
  return out;
}

// Parameters swapped in for one call: (module, name, its slice), restored after.
using Swaps = std::vector<std::tuple<Module*, std::string, at::Tensor>>;

void restore(Swaps& swaps) {
  for (auto& [m, name, slice] : swaps) m->set_param(name, slice);
  swaps.clear();
}

}  // namespace

void fully_shard(Schedule& sch, const CallSite& site) {
  Module& root = *sch.mod();
  if (root.meta().fully_shard_root)
    throw Error(fmt::format("fully_shard: {} is already fully sharded", sch.where()));
  auto group = sch.group() ? sch.group() : dist::world();
  const int parts = group->size();
  // Step 1. Check every parameter before changing any.
  struct Target {
    Module* module;
    std::string name;
    at::Tensor tensor;
  };
  std::vector<Target> targets;
  for (auto& [path, m] : managed_modules(root))
    for (auto& p : m->named_parameters(/*recurse=*/false)) {
      if (!p.value().defined() || m->meta().fully_sharded.count(p.key())) continue;
      std::string where = fmt::format("'{}{}' of {}", path.empty() ? "" : path + ".", p.key(), sch.where());
      if (m->meta().shards.count(p.key()))
        throw Error(fmt::format("fully_shard: {} is already split by shard over the same ranks; fully_shard the "
                                "modules that shard leaves whole, or shard over a group of its own",
                                where));
      if (p.value().dim() == 0 || p.value().size(0) % parts != 0)
        throw Error(fmt::format("fully_shard: {} has shape [{}]; its first axis must divide into the group's {} "
                                "ranks (valid group sizes divide {})",
                                where, fmt::join(p.value().sizes(), ", "), parts,
                                p.value().dim() ? p.value().size(0) : 0));
      targets.push_back({m, p.key(), p.value()});
    }
  if (targets.empty())
    throw Error(fmt::format("fully_shard: {} has no parameter left to shard (none, or each managed by a fully_shard "
                            "below it)", sch.where()));
  // Step 2. Keep this rank's slice in the same tensor objects (the optimizer's, ties), once each.
  std::unordered_map<c10::TensorImpl*, ShardSpec> done;
  for (auto& t : targets) {
    auto found = done.find(t.tensor.unsafeGetTensorImpl());
    ShardSpec spec{0, t.tensor.sizes().vec(), parts, group->rank(), 1};
    if (found == done.end()) {
      torch::NoGradGuard no_grad;
      t.tensor.set_data(spec.local(t.tensor).clone());
      t.tensor.mutable_grad() = at::Tensor();
      if (auto* meta = torch::autograd::impl::get_autograd_meta(t.tensor)) meta->grad_accumulator_.reset();
      done.emplace(t.tensor.unsafeGetTensorImpl(), spec);
    } else {
      spec = found->second;
    }
    t.module->meta().fully_sharded[t.name] = spec;
  }
  // Step 3. Each call gathers the whole parameters (a tie once) and puts the slices back after.
  auto swaps = std::make_shared<Swaps>();
  const int64_t group_id = group->id();
  root.add_forward_pre_hook([swaps, group_id](Module& self, Values&) {
    restore(*swaps);  // a call that failed half-way left whole tensors in place
    std::unordered_map<c10::TensorImpl*, at::Tensor> whole;
    for (auto& [path, m] : managed_modules(self))
      for (auto& [name, spec] : m->meta().fully_sharded) {
        at::Tensor slice = m->param(name);
        auto& full = whole[slice.unsafeGetTensorImpl()];
        if (!full.defined()) full = GatherSlices::apply(slice, group_id);
        swaps->emplace_back(m, name, slice);
        m->set_param(name, full);
      }
  });
  root.add_forward_post_hook([swaps](Module&, const Values&, Value&) { restore(*swaps); });
  root.meta().fully_shard_root = true;
  sch.log().append({"fully_shard", sch.path(), site.lua_args, site.source});
}

}  // namespace slapo
