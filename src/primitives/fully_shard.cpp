// fully_shard: each rank keeps 1/N of a subtree's parameters; calls gather them, backward
// reduce-scatters their gradients.
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/variable.h>

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/memory_ledger.h"
#include "distributed/gradient_reductions.h"
#include "distributed/group.h"
#include "distributed/world.h"
#include "primitives/primitives.h"

namespace slapo {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// An uninitialised tensor of the whole parameter's shape, counted as gathered while it lives.
at::Tensor empty_whole(const at::Tensor& slice, const ShardSpec& spec) {
  return empty_counted(spec.full_shape, slice.options().requires_grad(false), Held::Gathered);
}

// A whole gradient with zero rows appended up to `rows` along axis 0: every rank's part of equal
// length, as reduce-scatter needs.
at::Tensor padded_rows(const at::Tensor& t, int64_t rows) {
  if (t.size(0) == rows) return t;
  auto sizes = t.sizes().vec();
  sizes[0] = rows - t.size(0);
  return at::cat({t, at::zeros(sizes, t.options())}, 0);
}

// Starts gathering every rank's slice into `whole` and returns the wait. Where the group does not
// divide the first axis, the slices go padded to equal parts into a buffer of their own, and the
// wait copies the whole rows out of it.
std::function<void()> start_gather(at::Tensor whole, const at::Tensor& slice, const ShardSpec& spec,
                                   const char* caller) {
  auto group = dist::group_by_id(spec.group_id);
  const int64_t rows = spec.part_stride() * spec.parts;
  // contiguous: a pipeline traces the other stages' layers with stand-ins of stride 0
  if (rows == whole.size(0)) return group->all_gather_into_async(whole, slice.detach().contiguous(), caller);
  auto sizes = whole.sizes().vec();
  sizes[0] = rows;
  at::Tensor buffer = empty_counted(sizes, whole.options(), Held::Gathered);
  auto wait = group->all_gather_into_async(buffer, spec.padded(slice.detach()), caller);
  return [wait, whole, buffer]() mutable {
    wait();
    whole.copy_(buffer.narrow(0, 0, whole.size(0)));
  };
}

// The wait of a reduce-scatter whose whole gradient `held` counts as reducing until it is done.
std::function<at::Tensor()> counted_while_reducing(std::function<at::Tensor()> wait, std::shared_ptr<HeldBytes> held) {
  return [wait = std::move(wait), held = std::move(held)]() mutable {
    at::Tensor part = wait();
    held.reset();
    return part;
  };
}

// Whether something watches the parameter's gradient arrive: a tensor hook (sync's bwd_params) or
// a hook on its accumulation (data_parallel's buckets). Its reduction then goes through autograd.
bool gradient_observed(const at::Tensor& param) {
  if (!torch::autograd::impl::hooks(param).empty()) return true;
  auto accumulator = torch::autograd::impl::try_get_grad_accumulator(param);
  return accumulator && !accumulator->post_hooks().empty();
}

// Whether the backward pass running asks for the gradients of chosen tensors (autograd::grad, or
// backward with inputs), which it returns or accumulates itself.
bool returns_gradients() {
  const auto* wanted = torch::autograd::get_current_graph_task_exec_info();
  return wanted && !wanted->empty();
}

// The whole parameter from every rank's slice along axis 0 (or the one a prefetch gathered);
// backward gives each slice its part of the gradient summed over the group and, with `average`,
// divided by its size: the data-parallel average (without: the sum, for replicas whose gradients
// are each its rows' part of the batch's, as on pipeline stage meshes). With an `overlap_unit`
// the reduce-scatter is left in flight while backward goes on, and lands on the slice's .grad
// later (distributed/gradient_reductions.h); without, when a hook watches the gradient, or in a pass that
// returns gradients, backward waits for it and returns the slice's gradient.
struct GatherSlices : public torch::autograd::Function<GatherSlices> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& slice, const ShardSpec* spec,
                            const at::Tensor* prefetched, bool average, const void* overlap_unit) {
    ctx->saved_data["group"] = static_cast<int64_t>(spec->group_id);
    ctx->saved_data["average"] = average;
    ctx->saved_data["padded_rows"] = spec->part_stride() * spec->parts;
    ctx->saved_data["slice_rows"] = slice.size(0);
    ctx->saved_data["overlap_unit"] = static_cast<int64_t>(reinterpret_cast<intptr_t>(overlap_unit));
    if (overlap_unit) ctx->saved_data["slice"] = slice;  // the parameter whose .grad the reduction lands on
    if (prefetched) return *prefetched;
    at::Tensor whole = empty_whole(slice, *spec);
    start_gather(whole, slice, *spec, "fully_shard")();
    return whole;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto group = dist::group_by_id(static_cast<int>(ctx->saved_data["group"].toInt()));
    const auto* unit = reinterpret_cast<const void*>(static_cast<intptr_t>(ctx->saved_data["overlap_unit"].toInt()));
    land_other_units(unit);  // the previous unit's reductions first: one unit's whole gradients at a time
    // not made contiguous here: the reduce-scatter copies it contiguous once (a linear's weight
    // gradient arrives transposed, and a copy here would hold a second whole gradient)
    at::Tensor grad = padded_rows(grads[0], ctx->saved_data["padded_rows"].toInt());
    auto held = std::make_shared<HeldBytes>(Held::Reducing, static_cast<int64_t>(grad.nbytes()));
    auto wait = counted_while_reducing(group->reduce_scatter_async(grad, "fully_shard (backward)"), std::move(held));
    const int64_t rows = ctx->saved_data["slice_rows"].toInt();
    const int64_t divide_by = ctx->saved_data["average"].toBool() ? group->size() : 1;
    at::Tensor slice = unit ? ctx->saved_data["slice"].toTensor() : at::Tensor();
    // through autograd when a hook must see the reduced gradient, or when this pass returns gradients
    // rather than accumulating them (autograd::grad, as checkpoint's recomputation calls it)
    if (!unit || gradient_observed(slice) || returns_gradients())
      return {slice_gradient(wait(), rows, divide_by), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    start_gradient_reduction({unit, std::move(wait), slice, rows, divide_by});
    return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// How many ranks two groups have in common (one: this rank alone, as a TP group and a DP group).
size_t shared_ranks(const dist::Group& a, const dist::Group& b) {
  return std::count_if(a.ranks().begin(), a.ranks().end(), [&](int r) {
    return std::find(b.ranks().begin(), b.ranks().end(), r) != b.ranks().end();
  });
}

// A unit's subtree in two parts: the modules whose parameters a fully_shard at `root` manages, with
// their paths below it, and the fully_shard roots directly below it, whose subtrees are theirs.
// The experts of a block shard_experts spread over ranks are neither: each rank holds its own, so
// there is no common whole to slice, and they stay as they are (their router is managed).
struct UnitTree {
  std::vector<std::pair<std::string, Module*>> managed, nested;
};

UnitTree unit_tree(Module& root) {
  UnitTree out;
  std::vector<std::string> own_experts;  // paths of expert-parallel blocks' `experts`
  auto below = [](const std::string& path, const std::string& top) {
    return path == top || path.rfind(top + ".", 0) == 0;
  };
  for (auto& item : root.named_modules("", /*include_self=*/true)) {
    const std::string& path = item.key();
    auto* m = dynamic_cast<Module*>(item.value().get());
    if (!m) continue;
    bool inside = std::any_of(out.nested.begin(), out.nested.end(),
                              [&](const auto& unit) { return path.rfind(unit.first + ".", 0) == 0; }) ||
                  std::any_of(own_experts.begin(), own_experts.end(), [&](auto& e) { return below(path, e); });
    if (inside) continue;
    if (m->meta().expert_group >= 0) own_experts.push_back(path.empty() ? "experts" : path + ".experts");
    (!path.empty() && m->meta().fully_shard_root ? out.nested : out.managed).emplace_back(path, m);
  }
  return out;
}

std::vector<std::pair<std::string, Module*>> managed_modules(Module& root) { return unit_tree(root).managed; }

// Parameters swapped in for one call: (module, name, its slice), restored after.
using Swaps = std::vector<std::tuple<Module*, std::string, at::Tensor>>;

void restore(Swaps& swaps) {
  for (auto& [m, name, slice] : swaps) m->set_param(name, slice);
  swaps.clear();
}

// A whole parameter one call gathered, and the slice it came from.
struct Gathered {
  at::Tensor full, slice;
  ShardSpec spec;
  size_t nbytes = 0;  // its storage's size while it holds memory
};

PrefetchCounts& prefetch_counts() {
  static PrefetchCounts counts;
  return counts;
}

// Reshard after forward (FSDP's default). Autograd keeps the whole parameters of a call for its
// backward; when the call returns their storage is freed in place (the tensors autograd holds stay,
// empty), and when backward reaches the module (its outputs' gradients are ready) every rank
// gathers them again into the same storage. Writes go through an alias with a version counter of
// its own, so autograd sees no in-place change of what it saved. With prefetch, a unit's gather in
// backward also starts the gather of the call that returned before it (backward runs the calls in
// reverse order of their returns: the root first, then the last layer), as FSDP2's backward prefetch.
class Resharded {
 public:
  Resharded(std::vector<Gathered> gathered, bool prefetch) : gathered_(std::move(gathered)), prefetch_(prefetch) {
    for (auto& g : gathered_) {
      g.nbytes = g.full.storage().nbytes();
      g.full.storage().unsafeGetStorageImpl()->reset();
    }
  }

  // The call that returned before this one, whose gathers this one's backward starts.
  std::weak_ptr<Resharded> returned_before;

  void gather_again() {
    if (state_ == State::Done) return;  // another output's hook came first
    const bool prefetched = state_ == State::Gathering;
    start();
    for (auto& wait : waits_) wait();
    waits_.clear();
    gathered_.clear();  // autograd's saved tensors own the memory now and free it as backward goes
    state_ = State::Done;
    if (prefetched) ++prefetch_counts().backward;
    if (prefetch_)
      if (auto before = returned_before.lock()) before->start();
  }

 private:
  // Whether backward reads the whole tensor: autograd saved it, or a view of it (a linear's weight).
  // One held by nothing but this call (an embedding's table, whose backward needs only the
  // indices) is not gathered again.
  static bool read_in_backward(const Gathered& g) { return g.full.use_count() > 1 || g.full.storage().use_count() > 1; }

  // Gives each whole tensor backward reads its memory back and starts gathering into it.
  void start() {
    if (state_ != State::Freed) return;
    torch::NoGradGuard no_grad;
    for (auto& g : gathered_) {
      if (!read_in_backward(g)) {
        ++prefetch_counts().not_gathered_again;
        continue;
      }
      c10::DeviceGuard on_device(g.full.device());
      auto* storage = g.full.storage().unsafeGetStorageImpl();
      storage->set_data_ptr_noswap(counted_allocation(storage->allocator(), g.full.device(), g.nbytes, Held::Gathered));
      storage->set_nbytes(g.nbytes);
      at::Tensor alias = at::empty({0}, g.full.options().requires_grad(false));
      alias.set_(g.full.storage(), g.full.storage_offset(), g.full.sizes(), g.full.strides());
      waits_.push_back(start_gather(alias, g.slice, g.spec, "fully_shard (backward)"));
    }
    state_ = State::Gathering;
  }

  enum class State { Freed, Gathering, Done };
  State state_ = State::Freed;
  std::vector<Gathered> gathered_;
  std::vector<std::function<void()>> waits_;
  bool prefetch_;
};

// The call that returned last, of every unit: the next one to return links to it.
std::weak_ptr<Resharded>& last_returned() {
  static std::weak_ptr<Resharded> last;
  return last;
}

// After a call: free the whole parameters until backward needs them, when that is safe.
void reshard_after_call(std::vector<Gathered>& gathered, const Value& out, bool prefetch) {
  std::vector<at::Tensor> needing_grad;
  for (auto& t : tensors_in(out)) {
    if (!t.defined()) continue;
    if (t.requires_grad()) needing_grad.push_back(t);
    for (auto& g : gathered)  // an output that is (a view of) a parameter keeps it whole
      if (t.storage().is_alias_of(g.full.storage())) return;
  }
  if (!at::GradMode::is_enabled() || needing_grad.empty()) return;  // no backward will come through here
  auto pending = std::make_shared<Resharded>(std::move(gathered), prefetch);
  pending->returned_before = last_returned();
  last_returned() = pending;
  for (auto& t : needing_grad) t.register_hook([pending](const at::Tensor&) { pending->gather_again(); });
}

// One fully sharded unit's calls: the slices swapped out and the whole tensors gathered for the
// call in progress, and the gathers a prefetch started for its next call.
struct UnitCall {
  Module* module = nullptr;  // valid while the unit's hooks (which own this) live
  Swaps swaps;
  std::vector<Gathered> gathered;
  std::weak_ptr<UnitCall> next;  // the unit called after this one: its gathers start early
  bool average = true;           // backward averages the gradients over the group (else sums them)
  struct Pending {
    at::Tensor slice, whole;
    int64_t version;  // the slice's, when the gather started: an optimizer step since makes it stale
    std::function<void()> wait;
  };
  std::vector<Pending> pending;
};

// Every unit by its module, so a fully sharded root can chain the units below it.
std::unordered_map<const Module*, std::weak_ptr<UnitCall>>& units() {
  static std::unordered_map<const Module*, std::weak_ptr<UnitCall>> by_module;
  return by_module;
}

// The root's call prefetches the first unit below it, each unit the next one in the tree's order
// (FSDP2's usage: layers, then the model that runs them in order). A unit already chained by a
// fully_shard between the two keeps its link.
void link_prefetch(Module& root, const std::shared_ptr<UnitCall>& call) {
  units()[&root] = call;
  std::vector<std::shared_ptr<UnitCall>> below;
  for (auto& [path, m] : unit_tree(root).nested) {
    auto found = units().find(m);
    if (found != units().end())
      if (auto unit = found->second.lock()) below.push_back(unit);
  }
  std::shared_ptr<UnitCall> previous = call;
  for (auto& unit : below) {
    if (previous->next.expired()) previous->next = unit;
    previous = unit;
  }
}

// Starts the all-gather of every slice the unit's next call needs (a tie once).
void start_gathers(UnitCall& unit) {
  std::unordered_set<c10::TensorImpl*> started;
  for (auto& [path, m] : managed_modules(*unit.module))
    for (auto& [name, spec] : m->meta().fully_sharded) {
      at::Tensor slice = m->param(name);
      if (!started.insert(slice.unsafeGetTensorImpl()).second) continue;
      at::Tensor whole = empty_whole(slice, spec);
      auto wait = start_gather(whole, slice, spec, "fully_shard (prefetch)");
      unit.pending.push_back({slice, whole, slice._version(), std::move(wait)});
    }
}

// The prefetched whole tensors by slice, each gather waited for; one whose slice changed since it
// started (an optimizer step between the calls) is dropped and gathered again.
std::unordered_map<c10::TensorImpl*, at::Tensor> take_prefetched(UnitCall& unit) {
  std::unordered_map<c10::TensorImpl*, at::Tensor> ready;
  for (auto& p : unit.pending) {
    p.wait();
    bool fresh = p.slice._version() == p.version;
    if (fresh) ready.emplace(p.slice.unsafeGetTensorImpl(), p.whole);
    ++(fresh ? prefetch_counts().used : prefetch_counts().stale);
  }
  unit.pending.clear();
  return ready;
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
      if (p.value().dim() == 0)
        throw Error(fmt::format("fully_shard: {} is a scalar, which has no axis to split across the group's {} ranks; "
                                "fully_shard a module whose parameters have an axis, or make it a 1-element tensor",
                                where, parts));
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
  // Step 3. Each call gathers the whole parameters (a tie once) and puts the slices back after;
  // with prefetch it starts the next unit's gathers first.
  auto call = std::make_shared<UnitCall>();
  call->module = &root;
  link_prefetch(root, call);
  const bool prefetch = options.prefetch;
  const void* overlap_unit = options.overlap_reduce ? call.get() : nullptr;
  root.add_forward_pre_hook([call, prefetch, overlap_unit](Module& self, Values&) {
    restore(call->swaps);  // a call that failed half-way left whole tensors in place
    call->gathered.clear();
    auto ready = take_prefetched(*call);
    std::unordered_map<c10::TensorImpl*, at::Tensor> whole;
    for (auto& [path, m] : managed_modules(self))
      for (auto& [name, spec] : m->meta().fully_sharded) {
        at::Tensor slice = m->param(name);
        auto& full = whole[slice.unsafeGetTensorImpl()];
        if (!full.defined()) {
          auto found = ready.find(slice.unsafeGetTensorImpl());
          full = GatherSlices::apply(slice, &spec, found == ready.end() ? nullptr : &found->second, call->average,
                                     overlap_unit);
          call->gathered.push_back({full, slice, spec});
        }
        call->swaps.emplace_back(m, name, slice);
        m->set_param(name, full);
      }
    // not from checkpoint's recomputation in backward (a call with gradients there), where the next
    // unit in forward order is not the next one called
    bool recomputing = self.meta().checkpointed && at::GradMode::is_enabled();
    if (prefetch && !recomputing)
      if (auto next = call->next.lock(); next && next->pending.empty()) start_gathers(*next);
  });
  const bool reshard = options.reshard_after_forward;
  root.add_forward_post_hook([call, reshard, prefetch](Module& self, const Values&, Value& out) {
    restore(call->swaps);
    // under checkpoint a call with gradients is the recomputation, and its backward follows at once
    if (reshard && !self.meta().checkpointed) reshard_after_call(call->gathered, out, prefetch);
    call->gathered.clear();
  });
  root.meta().fully_shard_root = true;
  sch.log().append({"fully_shard", sch.path(), site.lua_args, site.source});
}

PrefetchCounts fully_shard_prefetch_counts() { return prefetch_counts(); }

void sum_fully_shard_gradients(const std::vector<const Module*>& units_to_sum) {
  for (const Module* m : units_to_sum) {
    auto found = units().find(m);
    if (auto unit = found == units().end() ? nullptr : found->second.lock()) unit->average = false;
  }
}

void chain_fully_shard_prefetch(const std::vector<const Module*>& call_order) {
  std::shared_ptr<UnitCall> previous;
  for (const Module* m : call_order) {
    auto found = units().find(m);
    auto unit = found == units().end() ? nullptr : found->second.lock();
    if (!unit) continue;  // not a unit: the chain passes over it
    if (previous && previous->next.expired()) previous->next = unit;
    previous = unit;
  }
}

}  // namespace slapo
