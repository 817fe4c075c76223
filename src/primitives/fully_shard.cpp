// fully_shard: each rank keeps 1/N of a subtree's parameters; calls gather them, backward
// reduce-scatters their gradients.
#include <torch/csrc/autograd/custom_function.h>

#include <algorithm>
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
    auto g = dist::group_by_id(static_cast<int>(group));
    auto sizes = slice.sizes().vec();
    sizes[0] *= g->size();
    at::Tensor whole = at::empty(sizes, slice.options().requires_grad(false));
    return g->all_gather_into(whole, slice.detach(), "fully_shard");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto group = dist::group_by_id(static_cast<int>(ctx->saved_data["group"].toInt()));
    at::Tensor part = group->reduce_scatter(grads[0].contiguous(), 0, "fully_shard (backward)");
    // a new tensor, not a view: the slice's gradient must not keep the whole reduced buffer alive
    return {part.div(group->size()), at::Tensor()};
  }
};

// How many ranks two groups have in common (one: this rank alone, as a TP group and a DP group).
size_t shared_ranks(const dist::Group& a, const dist::Group& b) {
  return std::count_if(a.ranks().begin(), a.ranks().end(), [&](int r) {
    return std::find(b.ranks().begin(), b.ranks().end(), r) != b.ranks().end();
  });
}

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

// A whole parameter one call gathered, and the slice it came from.
struct Gathered {
  at::Tensor full, slice;
  size_t nbytes = 0;  // its storage's size while it holds memory
};

// Reshard after forward (FSDP's default). Autograd keeps the whole parameters of a call for its
// backward; when the call returns their storage is freed in place (the tensors autograd holds stay,
// empty), and when backward reaches the module (its outputs' gradients are ready) every rank
// gathers them again into the same storage. Writes go through an alias with a version counter of
// its own, so autograd sees no in-place change of what it saved.
class Resharded {
 public:
  Resharded(std::vector<Gathered> gathered, int64_t group_id) : gathered_(std::move(gathered)), group_id_(group_id) {
    for (auto& g : gathered_) {
      g.nbytes = g.full.storage().nbytes();
      g.full.storage().unsafeGetStorageImpl()->reset();
    }
  }

  void gather_again() {
    if (gathered_.empty()) return;  // another output's hook came first
    torch::NoGradGuard no_grad;
    auto group = dist::group_by_id(static_cast<int>(group_id_));
    for (auto& g : gathered_) {
      c10::DeviceGuard on_device(g.full.device());
      auto* storage = g.full.storage().unsafeGetStorageImpl();
      storage->set_data_ptr_noswap(storage->allocator()->allocate(g.nbytes));
      storage->set_nbytes(g.nbytes);
      at::Tensor alias = at::empty({0}, g.full.options().requires_grad(false));
      alias.set_(g.full.storage(), g.full.storage_offset(), g.full.sizes(), g.full.strides());
      group->all_gather_into(alias, g.slice.detach(), "fully_shard (backward)");
    }
    gathered_.clear();  // autograd's saved tensors own the memory now and free it as backward goes
  }

 private:
  std::vector<Gathered> gathered_;
  int64_t group_id_;
};

// After a call: free the whole parameters until backward needs them, when that is safe.
void reshard_after_call(std::vector<Gathered>& gathered, const Value& out, int64_t group_id) {
  std::vector<at::Tensor> needing_grad;
  for (auto& t : tensors_in(out)) {
    if (!t.defined()) continue;
    if (t.requires_grad()) needing_grad.push_back(t);
    for (auto& g : gathered)  // an output that is (a view of) a parameter keeps it whole
      if (t.storage().is_alias_of(g.full.storage())) return;
  }
  if (!at::GradMode::is_enabled() || needing_grad.empty()) return;  // no backward will come through here
  auto pending = std::make_shared<Resharded>(std::move(gathered), group_id);
  for (auto& t : needing_grad) t.register_hook([pending](const at::Tensor&) { pending->gather_again(); });
}

// A parameter tied to one outside the unit (GPT-2's embedding and LM head in different units, or
// one in a unit and one outside all) would be used as a slice where it is not gathered: refused,
// naming both places and the module that holds them.
void check_not_shared_outside(const Schedule& sch, const std::unordered_map<const c10::TensorImpl*, std::string>& mine) {
  auto top = sch.parent();
  if (!top) return;  // the root: nothing outside
  while (top->parent()) top = top->parent();
  const std::string prefix = sch.path() + ".";
  for (auto& item : top->mod()->named_parameters(/*recurse=*/true)) {
    const std::string& name = item.key();
    auto inside = mine.find(item.value().unsafeGetTensorImpl());
    if (name.rfind(prefix, 0) == 0 || inside == mine.end()) continue;
    throw Error(fmt::format("fully_shard: '{}' of {} is tied to '{}' outside it; a unit must hold every use of its "
                            "parameters: fully_shard a module that contains both (their common parent, such as the "
                            "root) instead",
                            inside->second, sch.where(), name));
  }
}

}  // namespace

void fully_shard(Schedule& sch, const FullyShardOptions& options, const CallSite& site) {
  Module& root = *sch.mod();
  if (root.meta().fully_shard_root)
    throw Error(fmt::format("fully_shard: {} is already fully sharded", sch.where()));
  // FSDP2's order: the inner units first (each layer), then what holds them (the root)
  for (auto up = sch.parent(); up; up = up->parent())
    if (up->mod()->meta().fully_shard_root)
      throw Error(fmt::format("fully_shard: {} is inside {}, which is already fully sharded; apply fully_shard to the "
                              "inner modules first (each layer, then the root)",
                              sch.where(), up->where()));
  auto group = options.group ? options.group : sch.group();
  if (group->rank() < 0)
    throw Error(fmt::format("fully_shard: rank {} is not in {}, the group given for {}; every rank that calls it must "
                            "be one of the group's",
                            dist::world()->rank(), group->describe(), sch.where()));
  const int parts = group->size();
  // Step 1. Check every parameter before changing any.
  struct Target {
    Module* module;
    std::string name;
    at::Tensor tensor;
  };
  std::vector<Target> targets;
  std::unordered_map<const c10::TensorImpl*, std::string> mine;  // by tensor, its path in the unit
  for (auto& [path, m] : managed_modules(root))
    for (auto& p : m->named_parameters(/*recurse=*/false)) {
      if (!p.value().defined() || m->meta().fully_sharded.count(p.key())) continue;
      std::string where = fmt::format("'{}{}' of {}", path.empty() ? "" : path + ".", p.key(), sch.where());
      if (auto split = m->meta().shards.find(p.key()); split != m->meta().shards.end()) {
        // 2-D: shard's slice is split again across the ranks that hold the same one
        auto tp = dist::group_by_id(split->second.group_id);
        if (tp->id() == group->id())
          throw Error(fmt::format("fully_shard: {} is already split by shard over the same ranks ({}); fully_shard "
                                  "the modules that shard leaves whole, or fully shard across the data-parallel "
                                  "ranks, which hold the same slice (group = layout.dp_group of slapo.parallel.layout)",
                                  where, tp->describe()));
        if (shared_ranks(*tp, *group) > 1)
          throw Error(fmt::format("fully_shard: {} is split by shard over {}; fully_shard's group, {}, shares ranks "
                                  "with it, so it is not a data-parallel group: pass the ranks that hold the same "
                                  "slice (group = layout.dp_group of slapo.parallel.layout)",
                                  where, tp->describe(), group->describe()));
      }
      if (p.value().dim() == 0 || p.value().size(0) % parts != 0)
        throw Error(fmt::format("fully_shard: {} has shape [{}]; its first axis must divide into the group's {} "
                                "ranks (valid group sizes divide {})",
                                where, fmt::join(p.value().sizes(), ", "), parts,
                                p.value().dim() ? p.value().size(0) : 0));
      targets.push_back({m, p.key(), p.value()});
      mine.emplace(p.value().unsafeGetTensorImpl(), path.empty() ? p.key() : path + "." + p.key());
    }
  if (targets.empty())
    throw Error(fmt::format("fully_shard: {} has no parameter left to shard (none, or each managed by a fully_shard "
                            "below it)", sch.where()));
  check_not_shared_outside(sch, mine);
  // Step 2. Keep this rank's slice in the same tensor objects (the optimizer's, ties), once each.
  std::unordered_map<c10::TensorImpl*, ShardSpec> done;
  for (auto& t : targets) {
    auto found = done.find(t.tensor.unsafeGetTensorImpl());
    ShardSpec spec{0, t.tensor.sizes().vec(), parts, group->rank(), 1, group->id()};
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
  struct Call {
    Swaps swaps;
    std::vector<Gathered> gathered;
  };
  auto call = std::make_shared<Call>();
  const int64_t group_id = group->id();
  root.add_forward_pre_hook([call, group_id](Module& self, Values&) {
    restore(call->swaps);  // a call that failed half-way left whole tensors in place
    call->gathered.clear();
    std::unordered_map<c10::TensorImpl*, at::Tensor> whole;
    for (auto& [path, m] : managed_modules(self))
      for (auto& [name, spec] : m->meta().fully_sharded) {
        at::Tensor slice = m->param(name);
        auto& full = whole[slice.unsafeGetTensorImpl()];
        if (!full.defined()) {
          full = GatherSlices::apply(slice, group_id);
          call->gathered.push_back({full, slice});
        }
        call->swaps.emplace_back(m, name, slice);
        m->set_param(name, full);
      }
  });
  const bool reshard = options.reshard_after_forward;
  root.add_forward_post_hook([call, group_id, reshard](Module& self, const Values&, Value& out) {
    restore(call->swaps);
    // under checkpoint a call with gradients is the recomputation, and its backward follows at once
    if (reshard && !self.meta().checkpointed) reshard_after_call(call->gathered, out, group_id);
    call->gathered.clear();
  });
  root.meta().fully_shard_root = true;
  sch.log().append({"fully_shard", sch.path(), site.lua_args, site.source});
}

}  // namespace slapo
