// build (materialise and initialise consistently across ranks) and verify (forward + backward).
#include "primitives/verify.h"
#include "primitives/verify_checks.h"

#include <algorithm>
#include <map>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "distributed/gradient_reductions.h"
#include "distributed/group.h"
#include "distributed/split_tensors.h"
#include "distributed/world.h"
#include "graph/traced_graph.h"
#include "models/sequence_split.h"
#include "models/zoo.h"
#include "primitives/pretrained_slices.h"

namespace slapo {

namespace {

// Every module of a tree with its path, pre-order.
void collect(const std::shared_ptr<Module>& m, const std::string& path,
             std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out) {
  out.emplace_back(path, m);
  for (auto& [name, child] : m->children_in_order()) collect(child, path.empty() ? name : path + "." + name, out);
}

// Runs `model` on inputs with a recording hook on every module: path -> first output tensor.
// Paths are the unscheduled model's names, so a leaf a wrapper took is found under its old path; the wrappers
// themselves are not recorded.
std::vector<std::pair<std::string, at::Tensor>> trace_outputs(const std::shared_ptr<Module>& model, const Values& inputs) {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> mods;
  collect(model, "", mods);
  std::vector<std::pair<std::string, at::Tensor>> seen;
  std::vector<std::pair<std::shared_ptr<Module>, int>> hooks;
  for (auto& [path, m] : mods) {
    if (!m->meta().moved_leaves.empty()) continue;
    std::string p = unscheduled_name(*model, path);
    hooks.emplace_back(m, m->add_forward_post_hook([p, &seen](Module&, const Values&, Value& out) {
      if (out.isTensor()) seen.emplace_back(p, out.toTensor().detach());
    }));
  }
  try {
    torch::NoGradGuard no_grad;
    (*model)(inputs);
  } catch (...) {
    for (auto& [m, id] : hooks) m->remove_hook(id);
    throw;
  }
  for (auto& [m, id] : hooks) m->remove_hook(id);
  return seen;
}

std::string first_divergence(const std::shared_ptr<Module>& reference, const std::shared_ptr<Module>& scheduled,
                             const Values& inputs, const VerifyOptions& o, uint64_t seed) {
  torch::manual_seed(seed);
  auto ref = trace_outputs(reference, inputs);
  torch::manual_seed(seed);
  auto sch = trace_outputs(scheduled, inputs);
  // a module called several times (T5's dropout after the embedding and after the last norm) is
  // compared call by call: its n-th output with the other model's n-th
  std::map<std::string, std::vector<at::Tensor>> by_path;
  for (auto& [path, t] : sch) by_path[path].push_back(t);
  std::map<std::string, size_t> calls;
  for (auto& [path, t] : ref) {
    size_t call = calls[path]++;
    auto it = by_path.find(path);
    if (it == by_path.end() || call >= it->second.size()) continue;
    const at::Tensor& other = it->second[call];
    if (other.sizes() != t.sizes()) continue;  // replaced or sharded
    if (!close(t, other, o))
      return fmt::format("; the first module whose output differs is '{}'{} (max abs difference {:g})",
                         path.empty() ? "<root>" : path, call > 0 ? fmt::format(" in its call {}", call + 1) : "",
                         max_abs_diff(t, other));
  }
  return "";
}

// The first parameter (by path) that lives on the meta device: shapes without values.
std::string first_meta_parameter(const Module& root) {
  for (auto& p : root.named_parameters(/*recurse=*/true))
    if (p.value().device().is_meta()) return p.key();
  for (auto& b : root.named_buffers(/*recurse=*/true))
    if (b.value().device().is_meta()) return b.key();
  return "";
}

// Every meta parameter of the tree becomes an empty CPU tensor of its shape and dtype (values
// come from the initialisation after). A tensor shared by several modules (tied weights) gets
// one replacement, and traced graphs that take it as an input take the replacement.
void materialise_on_cpu(const std::shared_ptr<Module>& root) {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> mods;
  collect(root, "", mods);
  std::unordered_map<const c10::TensorImpl*, at::Tensor> fresh;
  for (auto& [path, m] : mods) {
    std::vector<std::pair<std::string, at::Tensor>> own;
    for (auto& p : m->named_parameters(/*recurse=*/false)) own.emplace_back(p.key(), p.value());
    for (auto& [name, t] : own) {
      if (!t.device().is_meta()) continue;
      auto& replacement = fresh[t.unsafeGetTensorImpl()];
      if (!replacement.defined())
        replacement = torch::empty(t.sizes(), t.options().device(at::kCPU)).requires_grad_(t.requires_grad());
      m->set_param(name, replacement);
    }
  }
  for (auto& [path, m] : mods)
    if (m->meta().graph) m->meta().graph->swap_params(fresh);
}

// Initialises every parameter of `root` as a whole model initialised from `seed` would have it
// (same seed, same order on every rank), each rank keeping its slices. The initialisers walk a copy
// of the model's own tree one module at a time: a module's parameters are made whole just before
// its initialisation, copied into the slices of the live tensors just after, and freed, so a rank
// holds its share plus one module's whole parameters, not a whole model.
void initialise_slices(Module& root, Schedule& sch, uint64_t seed) {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> live;
  collect(std::dynamic_pointer_cast<Module>(root.shared_from_this()), "", live);
  // The copy needs the tree, not the values: while it is cloned the live tensors lend it empty ones.
  std::vector<std::pair<at::Tensor, at::Tensor>> lent;  // (live tensor, its data)
  std::unordered_set<c10::TensorImpl*> seen;
  for (auto& [path, m] : live)
    for (auto& p : m->named_parameters(/*recurse=*/false))
      if (seen.insert(p.value().unsafeGetTensorImpl()).second) {
        lent.emplace_back(p.value(), p.value().data());
        p.value().set_data(torch::empty({0}, p.value().options()));
      }
  std::shared_ptr<Module> full;
  try {
    full = root.deep_clone();
  } catch (...) {
    for (auto& [tensor, data] : lent) tensor.set_data(data);
    throw;
  }
  for (auto& [tensor, data] : lent) tensor.set_data(data);
  // The copy has the model's own tree (deep_clone takes back what wrappers hold), so each live
  // parameter finds its copy by its unscheduled name.
  std::unordered_map<std::string, at::Tensor> copy_params;
  for (auto& p : full->named_parameters()) copy_params.emplace(p.key(), p.value());
  // by tensor, so a tie split under one name only (GPT-2's lm_head.weight) is split alike
  const auto splits = splits_by_tensor(root);
  struct Target {
    at::Tensor live;
    Splits splits;
  };
  struct Whole {
    at::Tensor copy;
    std::vector<int64_t> shape;
    std::vector<Target> targets;
  };
  std::unordered_map<c10::TensorImpl*, Whole> wholes;
  for (auto& [path, m] : live)
    for (auto& p : m->named_parameters(/*recurse=*/false)) {
      std::string name = unscheduled_name(root, path.empty() ? p.key() : path + "." + p.key());
      auto found = copy_params.find(name);
      if (found == copy_params.end())
        throw Error(fmt::format("build: '{}' of {} has no counterpart in the model's copy", name, sch.where()));
      auto split = splits.find(p.value().unsafeGetTensorImpl());
      Target target{p.value(), split == splits.end() ? Splits{} : split->second};
      auto& whole = wholes[found->second.unsafeGetTensorImpl()];
      if (!whole.copy.defined()) {
        whole.copy = found->second;
        whole.shape = target.splits.empty() ? p.value().sizes().vec() : target.splits[0]->full_shape;
      }
      whole.targets.push_back(std::move(target));
    }
  std::unordered_set<c10::TensorImpl*> done;
  auto own_wholes = [&](Module& m) {
    std::vector<Whole*> out;
    for (auto& p : m.named_parameters(/*recurse=*/false)) {
      auto found = wholes.find(p.value().unsafeGetTensorImpl());
      if (found != wholes.end() && !done.count(found->first)) out.push_back(&found->second);
    }
    return out;
  };
  InitHooks hooks;
  hooks.before = [&](Module& m) {
    for (Whole* w : own_wholes(m)) w->copy.set_data(torch::empty(w->shape, w->copy.options()));
  };
  hooks.again = [&](Module& m, const std::string& param) {
    auto found = wholes.find(m.param(param).unsafeGetTensorImpl());
    if (found != wholes.end()) done.erase(found->first);
  };
  hooks.after = [&](Module& m) {
    torch::NoGradGuard no_grad;
    for (Whole* w : own_wholes(m)) {
      for (auto& t : w->targets) t.live.copy_(local_part(t.splits, w->copy));
      w->copy.set_data(torch::empty({0}, w->copy.options()));
      done.insert(w->copy.unsafeGetTensorImpl());
    }
  };
  torch::manual_seed(seed);
  if (auto* c = model_config(root))  // a zoo model: its family's _init_weights
    init_zoo_weights(*full, *c, hooks);
  else  // anything else: each layer's own PyTorch initialisation
    init_weights_torch(*full, hooks);
}

}  // namespace

std::shared_ptr<Module> build(Schedule& sch, const ScheduleBuildOptions& options_in) {
  auto root = sch.mod();
  auto options = options_in;
  // A model from_pretrained left on the meta device: each rank reads its slices of the checkpoint.
  read_pretrained_slices(root, options.defer_checkpoint_reads);
  // Deferred initialisation: a model built on the meta device (shapes only) is materialised on
  // the CPU and initialised here, at full size and sliced, so every rank holds its own shard.
  std::string meta = first_meta_parameter(*root);
  if (!meta.empty()) {
    if (options.init == ScheduleBuildOptions::None && !options.init_fn)
      throw Error(fmt::format("build: '{}' of {} is on the meta device (shapes, no values); init_weights = false "
                              "keeps values, and this model has none: leave init_weights out to initialise it",
                              meta, sch.where()));
    materialise_on_cpu(root);  // an init_weights function then fills the values, else HF's init
    if (!options.init_fn) options.init = ScheduleBuildOptions::All;
  }
  if (options.init_fn) {
    std::vector<std::pair<std::string, std::shared_ptr<Module>>> mods;
    collect(root, sch.path(), mods);
    for (auto& [path, m] : mods) options.init_fn(path, m);
  } else if (options.init == ScheduleBuildOptions::All) {
    initialise_slices(*root, sch, options.seed);
    meta = first_meta_parameter(*root);
    if (!meta.empty())  // a buffer: no initialiser knows its values
      throw Error(fmt::format("build: '{}' of {} is on the meta device and is not a parameter, so build cannot "
                              "initialise it; create that module on the CPU", meta, sch.where()));
  }
  return root;
}


// How many ranks of the context-parallel group fully_shard's `group` holds: all of them (its
// average then counts each of their parts already) or this one alone (their slices are alike, and
// the parts are summed over the cp group); other overlaps are refused.
int shared_ranks(const dist::Group& group, const dist::Group& cp_group) {
  int shared = 0;
  for (int r : cp_group.ranks())
    shared += std::count(group.ranks().begin(), group.ranks().end(), r) > 0 ? 1 : 0;
  return shared;
}

// The ranks one verify spans: the schedule's group, or the world when a parameter is split over
// another group too (2-D: fully sharded across data-parallel ranks of other tensor-parallel groups).
std::shared_ptr<dist::Group> verify_group(Schedule& sch, const std::unordered_map<c10::TensorImpl*, Splits>& splits) {
  for (auto& [impl, chain] : splits)
    for (const ShardSpec* spec : chain)
      if (spec->group_id != sch.group()->id()) return dist::world();
  return sch.group();
}

VerifyReport verify_against(Schedule& sch, Module& reference_module, Values inputs, const VerifyOptions& o) {
  auto scheduled = sch.mod();
  auto reference = std::dynamic_pointer_cast<Module>(reference_module.shared_from_this());
  // Both made under init_empty_weights (Slapo's Verify of an empty model): both get the values
  // build gives them from its seed, the scheduled model each rank's slices of the same full tensors.
  const std::string scheduled_meta = first_meta_parameter(*scheduled), reference_meta = first_meta_parameter(*reference);
  if (!scheduled_meta.empty() && !reference_meta.empty()) {
    build(sch, ScheduleBuildOptions{});
    build(*Schedule::create(reference, sch.group()), ScheduleBuildOptions{});
  } else if (!scheduled_meta.empty() || !reference_meta.empty()) {
    bool mine = !scheduled_meta.empty();
    throw Error(fmt::format("verify: the {} model's '{}' is on the meta device (shapes, no values) but the {} model "
                            "has values, so the two cannot be compared; verify an empty model before slapo.build "
                            "(verify gives both build's values), or build both",
                            mine ? "scheduled" : "original", mine ? scheduled_meta : reference_meta,
                            mine ? "original" : "scheduled"));
  }
  const auto splits = splits_by_tensor(*scheduled);  // by tensor: after build replaced the meta ones
  auto group = verify_group(sch, splits);
  check_same_weights(*reference, group);
  for (auto& v : inputs) v = same_on_all_ranks(v, group);
  // context_parallel: every rank of its group takes the same rows and keeps its share of the tokens
  auto sequence_split = sequence_split_of(*scheduled);
  auto cp_group = sequence_split ? dist::group_by_id(sequence_split->group_id()) : nullptr;
  if (cp_group)
    for (auto& v : inputs) v = same_on_all_ranks(v, cp_group);
  bool was_training = scheduled->is_training();
  scheduled->train(o.train);
  reference->train(o.train);
  VerifyReport report;
  // On a mismatch every rank locates the first differing module (a collective run), then raises.
  auto fail = [&](const std::string& what) {
    std::string where = first_divergence(reference, scheduled, inputs, o, o.seed);
    scheduled->train(was_training);
    return Error(what.empty() ? fmt::format("verify: another rank found a mismatch{}", where) : what + where);
  };

  // Forward on both with the same seed (dropout masks line up in training mode).
  torch::manual_seed(o.seed);
  Value ref_out = (*reference)(inputs);
  torch::manual_seed(o.seed);
  Value sch_out = (*scheduled)(inputs);
  std::vector<at::Tensor> ref_ts = tensors_in(ref_out), sch_ts = tensors_in(sch_out);
  // Split sequences: a rank's outputs per token are its tokens' (compared with the original's at
  // those positions); its parameters' gradients are its tokens' part, summed over the group below
  // (a loss, the whole sequence's on every rank, has its gradient counted once a rank: averaged)
  std::vector<at::Tensor> ref_whole = ref_ts;
  std::vector<c10::optional<at::Tensor>> token_indices(ref_ts.size());
  if (sequence_split)
    for (size_t i = 0; i < ref_ts.size() && i < sch_ts.size(); ++i)
      if (ref_ts[i].dim() >= 2 && sch_ts[i].dim() == ref_ts[i].dim() &&
          sch_ts[i].size(1) * sequence_split->ranks() == ref_ts[i].size(1)) {
        token_indices[i] = sequence_split->local_indices(ref_ts[i].size(1), ref_ts[i].device(), "verify");
        ref_ts[i] = ref_ts[i].index_select(1, *token_indices[i]);
      }
  std::string problem;
  if (ref_ts.size() != sch_ts.size())
    problem = fmt::format("verify: the scheduled model returns {} tensors, the original {}", sch_ts.size(), ref_ts.size());
  for (size_t i = 0; problem.empty() && i < ref_ts.size(); ++i) {
    if (ref_ts[i].sizes() != sch_ts[i].sizes()) {
      problem = fmt::format("verify: output {} has shape [{}] in the scheduled model but [{}] in the original", i + 1,
                            fmt::join(sch_ts[i].sizes(), ", "), fmt::join(ref_ts[i].sizes(), ", "));
      break;
    }
    double diff = max_abs_diff(ref_ts[i], sch_ts[i]);
    report.max_output_diff = std::max(report.max_output_diff, diff);
    if (!close(ref_ts[i], sch_ts[i], o))
      problem = fmt::format("verify: output {} differs on rank {} (max abs difference {:g}, rtol {:g}, atol {:g})", i + 1,
                            sch.group()->rank(), diff, o.rtol, atol_for(ref_ts[i], o));
    else
      ++report.outputs;
  }
  if (any_rank(!problem.empty(), group)) throw fail(problem);
  if (!o.backward) {
    scheduled->train(was_training);
    return report;
  }

  // Backward with the same random output gradients on both (identical on every rank).
  for (auto& p : reference->parameters()) p.mutable_grad() = at::Tensor();
  for (auto& p : scheduled->parameters()) p.mutable_grad() = at::Tensor();
  std::vector<at::Tensor> ref_roots, sch_roots, grads_out, sch_grads_out;
  torch::manual_seed(o.seed + 1);
  for (size_t i = 0; i < ref_ts.size(); ++i) {
    at::Tensor g = torch::randn(ref_whole[i].sizes(), ref_whole[i].options().requires_grad(false));
    group->broadcast(g, 0, "verify");
    if (cp_group) cp_group->broadcast(g, 0, "verify");
    if (!ref_whole[i].requires_grad()) continue;
    ref_roots.push_back(ref_whole[i]);
    sch_roots.push_back(sch_ts[i]);
    grads_out.push_back(g);
    sch_grads_out.push_back(token_indices[i] ? g.index_select(1, *token_indices[i]) : g);
  }
  if (!ref_roots.empty()) torch::autograd::backward(ref_roots, grads_out);
  if (!sch_roots.empty()) run_backward([&] { torch::autograd::backward(sch_roots, sch_grads_out); });
  if (cp_group) {  // every rank walks the same parameters: one all-reduce each
    const bool per_token = std::any_of(token_indices.begin(), token_indices.end(), [](auto& t) { return t.has_value(); });
    // fully_shard's slices: averaged over a group of whole cp groups (the data-parallel one, as
    // torchtitan shards), or over one holding this rank alone of its cp group; the ranks agree on
    // a refusal before any of them reduces
    const auto averaged = fully_sharded_tensors(*scheduled);
    std::unordered_set<std::string> counted;
    std::string refused;
    for (auto& [name, param] : unique_named_parameters(*scheduled)) {
      const auto split = splits.find(param.unsafeGetTensorImpl());
      if (!averaged.count(param.unsafeGetTensorImpl()) || split == splits.end() || split->second.empty()) continue;
      auto shard_group = dist::group_by_id(split->second.back()->group_id);
      const int shared = shared_ranks(*shard_group, *cp_group);
      if (shared == cp_group->size()) counted.insert(name);
      else if (shared != 1 && refused.empty())
        refused = fmt::format("verify: '{}' is fully sharded over {}, which holds {} of the {} ranks of the "
                              "context_parallel group {}; shard it over groups holding the whole cp group (a "
                              "layout's dp_group) or one rank of it",
                              name, shard_group->describe(), shared, cp_group->size(), cp_group->describe());
    }
    if (any_rank(!refused.empty(), cp_group))
      throw Error(refused.empty() ? "verify: another rank of the context_parallel group refused its fully_shard groups"
                                  : refused);
    torch::NoGradGuard no_grad;
    for (auto& [name, param] : unique_named_parameters(*scheduled)) {
      // in place; zeros where this rank has no gradient, so every rank runs the same collectives
      at::Tensor g = param.grad().defined() ? param.grad() : torch::zeros_like(param);
      if (counted.count(name)) {  // every rank's part in it already: 1/cp of the sum for outputs
        if (per_token) g.mul_(cp_group->size());
        continue;
      }
      cp_group->all_reduce(g, "verify");
      if (!per_token) g.div_(cp_group->size());
    }
  }

  // Compare every gradient (gathering sharded ones: a collective, so every rank walks them all).
  // by unscheduled name: a leaf that checkpoint/fuse moved into a wrapper keeps its counterpart
  std::unordered_map<std::string, at::Tensor> ref_params;
  for (auto& p : reference->named_parameters()) ref_params.emplace(unscheduled_name(*reference, p.key()), p.value());
  for (auto& [name, param] : unique_named_parameters(*scheduled)) {
    ++report.params;
    auto ref_found = ref_params.find(unscheduled_name(*scheduled, name));
    const at::Tensor* ref = ref_found == ref_params.end() ? nullptr : &ref_found->second;
    if (!ref) {
      bool allowed = o.allow_any_missing ||
                     std::find(o.allow_missing.begin(), o.allow_missing.end(), name) != o.allow_missing.end();
      if (!allowed && problem.empty())
        problem = fmt::format("verify: the scheduled parameter '{}' has no counterpart of that name in the original "
                              "model, so its gradient cannot be compared (pass {{allow_missing = {{\"{}\"}}}} to "
                              "verify without it, or allow_missing = true for every such parameter)",
                              name, name);
      ++report.skipped_params;
      report.skipped.push_back(name);
      continue;
    }
    at::Tensor g = param.grad();
    at::Tensor rg = ref->grad();
    auto found = splits.find(param.unsafeGetTensorImpl());
    if (found != splits.end()) {  // every rank gathers, with zeros standing in for a missing gradient
      at::Tensor gathered = gather_whole(found->second, g.defined() ? g : torch::zeros_like(param), "verify");
      if (g.defined()) g = gathered;
    }
    if (!rg.defined() && !g.defined()) ++report.no_gradient;
    if (!problem.empty() || (!rg.defined() && !g.defined())) continue;
    if (!g.defined() || !rg.defined()) {
      problem = fmt::format("verify: '{}' has a gradient in the {} model only", name,
                            g.defined() ? "scheduled" : "original");
      continue;
    }
    double diff = g.sizes() == rg.sizes() ? max_abs_diff(g, rg) : -1;
    report.max_grad_diff = std::max(report.max_grad_diff, diff);
    if (!close(rg, g, o))
      problem = fmt::format("verify: the gradient of '{}' differs on rank {} (max abs difference {:g}, shape [{}] vs [{}])",
                            name, sch.group()->rank(), diff, fmt::join(g.sizes(), ", "), fmt::join(rg.sizes(), ", "));
    else
      ++report.gradients;
  }
  for (auto& p : reference->parameters()) p.mutable_grad() = at::Tensor();
  for (auto& p : scheduled->parameters()) p.mutable_grad() = at::Tensor();
  if (any_rank(!problem.empty(), group)) throw fail(problem);
  scheduled->train(was_training);
  return report;
}

}  // namespace slapo
