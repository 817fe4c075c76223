// The schedulable module base: slots, hooks, parameters by name and deep copies.
#include "core/module.h"

#include <algorithm>
#include <atomic>
#include <unordered_set>

#include "core/error.h"

namespace slapo {

namespace {
std::atomic<int64_t> g_live_modules{0};
// Set while an error that already names the innermost scheduled module climbs out of its callers;
// cleared when a call returns and when an outermost call starts.
thread_local bool t_error_located = false;
thread_local int t_call_depth = 0;
struct CallDepth {
  CallDepth() {
    if (t_call_depth++ == 0) t_error_located = false;
  }
  ~CallDepth() { --t_call_depth; }
};
}  // namespace

Module::Module(std::string type_name) : torch::nn::Module(type_name), type_name_(std::move(type_name)) {
  ++g_live_modules;
}

// Shares parameters and children with `other`, but not buffers: torch::nn::Module cannot swap a
// registered buffer, so deep_clone_impl registers the copy's own.
Module::Module(const Module& other)
    : torch::nn::Module(other.name()),
      type_name_(other.type_name_),
      profile_label_(other.profile_label_),
      meta_(other.meta_),
      slots_(other.slots_),
      wrapper_(other.wrapper_),
      pre_hooks_(other.pre_hooks_),
      post_hooks_(other.post_hooks_) {
  train(other.is_training());  // before the children: train() recurses, and they are shared
  for (auto& p : other.parameters_)
    register_parameter(p.key(), p.value(), p.value().defined() && p.value().requires_grad());
  for (auto& slot : slots_) register_module(slot.first, slot.second);
  ++g_live_modules;
}

Module::~Module() { --g_live_modules; }

int64_t Module::live_count() { return g_live_modules.load(); }

bool Module::runs_plain() const {
  return pre_hooks_.empty() && post_hooks_.empty() && !wrapper_ && !forward_override_ && !meta_.rng_state &&
         !meta_.checkpointed;
}

Value Module::operator()(Values args) {
  last_call_.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].isTensor()) {
      const auto& t = args[i].toTensor();
      last_call_[i].shape.assign(t.sizes().begin(), t.sizes().end());
      last_call_[i].dtype = t.scalar_type();
      last_call_[i].device = t.device();
    } else {
      last_call_[i] = ArgSpec{};
    }
  }
  // A named span in profiles (free when no profiler is recording).
  RECORD_USER_SCOPE(profile_label_.empty() ? type_name_.c_str() : profile_label_.c_str());
  CallDepth depth;
  try {
    Value out = wrapper_ ? wrapper_(*this, std::move(args), [this](Values a) { return call_unwrapped(std::move(a)); })
                         : call_unwrapped(std::move(args));
    t_error_located = false;  // an error caught and handled below (a pcall in a Lua forward) is over
    return out;
  } catch (const c10::Error& e) {
    rethrow_located(e.what_without_backtrace());
  } catch (const std::exception& e) {
    rethrow_located(e.what());
  }
}

std::string Module::schedule_path() const {
  // the label is "<type> <path>", or the type alone for a schedule's root
  if (profile_label_.size() <= type_name_.size() + 1) return "";
  return profile_label_.substr(type_name_.size() + 1);
}

// "in 'transformer.wte': Embedding: indices must be integers": the innermost module with a path
// names itself once; its callers pass the error on as it is.
void Module::rethrow_located(const char* what) const {
  std::string path = schedule_path();
  if (t_error_located || path.empty()) throw;
  t_error_located = true;
  if (std::string(what).find("'" + path + "'") != std::string::npos) throw;  // it names the module already
  throw ModuleCallError(fmt::format("in '{}': {}", path, what));
}

Value Module::call_unwrapped(Values args) {
  for (auto& hook : pre_hooks_) hook.second(*this, args);
  Value out = forward_override_ ? forward_override_(args) : forward(args);
  for (auto& hook : post_hooks_) hook.second(*this, args, out);
  return finish(std::move(out));
}

namespace {
std::atomic<int> g_next_hook_id{1};
}

int Module::add_forward_pre_hook(PreHook hook) {
  int id = g_next_hook_id++;
  pre_hooks_.emplace_back(id, std::move(hook));
  return id;
}

int Module::add_forward_post_hook(PostHook hook) {
  int id = g_next_hook_id++;
  post_hooks_.emplace_back(id, std::move(hook));
  return id;
}

Module::Hooks Module::take_hooks() {
  Hooks out{std::move(pre_hooks_), std::move(post_hooks_)};
  pre_hooks_.clear();
  post_hooks_.clear();
  return out;
}

void Module::give_hooks(Hooks hooks) {
  for (auto& h : hooks.pre) pre_hooks_.push_back(std::move(h));
  for (auto& h : hooks.post) post_hooks_.push_back(std::move(h));
}

void Module::remove_hook(int id) {
  auto drop = [id](auto& hooks) {
    hooks.erase(std::remove_if(hooks.begin(), hooks.end(), [id](auto& h) { return h.first == id; }), hooks.end());
  };
  drop(pre_hooks_);
  drop(post_hooks_);
}

bool Module::has_child(const std::string& name) const {
  for (auto& slot : slots_)
    if (slot.first == name) return true;
  return false;
}

std::shared_ptr<Module> Module::child(const std::string& name) const {
  for (auto& slot : slots_)
    if (slot.first == name) return slot.second;
  std::vector<std::string> names;
  for (auto& slot : slots_) names.push_back(slot.first);
  throw Error(fmt::format("{}: no child '{}' (children: {})", type_name_, name,
                          join_or_none(names)));
}

std::vector<std::pair<std::string, std::shared_ptr<Module>>> Module::children_in_order() const {
  return slots_;
}

bool Module::contains(const Module* other) const {
  std::unordered_set<const Module*> seen;
  std::vector<const Module*> todo{this};
  while (!todo.empty()) {
    const Module* m = todo.back();
    todo.pop_back();
    if (m == other) return true;
    if (!seen.insert(m).second) continue;
    for (auto& slot : m->slots_) todo.push_back(slot.second.get());
  }
  return false;
}

void Module::set_child(const std::string& name, std::shared_ptr<Module> module) {
  if (!module) throw Error(fmt::format("{}: cannot put an empty module in slot '{}'", type_name_, name));
  // A module inside itself would make every walk of the tree endless.
  if (module->contains(this))
    throw Error(fmt::format("{}: cannot put a {} in slot '{}': it contains this {} (a module cannot contain itself)",
                            type_name_, module->type_name(), name, type_name_));
  for (auto& slot : slots_) {
    if (slot.first == name) {
      replace_module(name, module);
      slot.second = std::move(module);
      return;
    }
  }
  register_module(name, module);
  slots_.emplace_back(name, std::move(module));
}

size_t Module::remove_child(const std::string& name) {
  for (size_t i = 0; i < slots_.size(); ++i) {
    if (slots_[i].first != name) continue;
    unregister_module(name);
    slots_.erase(slots_.begin() + static_cast<std::ptrdiff_t>(i));
    return i;
  }
  child(name);  // raises, naming the children there are
  return slots_.size();
}

void Module::insert_child(size_t index, const std::string& name, std::shared_ptr<Module> module) {
  if (has_child(name)) throw Error(fmt::format("{}: slot '{}' is taken", type_name_, name));
  set_child(name, std::move(module));  // appended, with set_child's checks
  if (index + 1 >= slots_.size()) return;
  // LibTorch keeps children in registration order (named_parameters follows it): register the
  // ones after `index` again behind the new one.
  std::rotate(slots_.begin() + static_cast<std::ptrdiff_t>(index), slots_.end() - 1, slots_.end());
  for (size_t i = index + 1; i < slots_.size(); ++i) {
    unregister_module(slots_[i].first);
    register_module(slots_[i].first, slots_[i].second);
  }
}

bool Module::has_param(const std::string& name) const { return parameters_.contains(name); }

at::Tensor Module::param(const std::string& name) const {
  if (const at::Tensor* t = parameters_.find(name)) return *t;
  throw Error(fmt::format("{}: no parameter '{}' (parameters: {})", type_name_, name,
                          join_or_none(parameters_.keys())));
}

void Module::set_param(const std::string& name, at::Tensor value) {
  if (parameters_.contains(name)) {
    parameters_[name] = std::move(value);
  } else {
    bool requires_grad = value.defined() && value.requires_grad();
    register_parameter(name, std::move(value), requires_grad);
  }
}

std::shared_ptr<const Module::SavedState> Module::save_state() const {
  return std::make_shared<SavedState>(SavedState{static_cast<const torch::nn::Module&>(*this), profile_label_, meta_,
                                                 slots_, wrapper_, forward_override_, pre_hooks_, post_hooks_});
}

void Module::restore_state(const SavedState& saved) {
  static_cast<torch::nn::Module&>(*this) = saved.base;
  profile_label_ = saved.profile_label;
  meta_ = saved.meta;
  slots_ = saved.slots;
  wrapper_ = saved.wrapper;
  forward_override_ = saved.forward_override;
  pre_hooks_ = saved.pre_hooks;
  post_hooks_ = saved.post_hooks;
}

std::shared_ptr<Module> Module::deep_clone() const {
  std::unordered_map<c10::TensorImpl*, at::Tensor> copies;
  return deep_clone_impl(copies);
}

std::shared_ptr<Module> Module::deep_clone_impl(
    std::unordered_map<c10::TensorImpl*, at::Tensor>& copies) const {
  auto copy = shallow_copy();
  auto clone_tensor = [&](const at::Tensor& t) -> at::Tensor {
    if (!t.defined()) return t;
    auto found = copies.find(t.unsafeGetTensorImpl());
    if (found != copies.end()) return found->second;  // tied: one copy for all its names
    at::Tensor c = t.detach().clone().requires_grad_(t.requires_grad());
    copies.emplace(t.unsafeGetTensorImpl(), c);
    return c;
  };
  for (auto& item : parameters_) copy->parameters_[item.key()] = clone_tensor(item.value());
  for (auto& item : named_buffers(/*recurse=*/false)) copy->register_buffer(item.key(), clone_tensor(item.value()));
  for (auto& slot : slots_) copy->set_child(slot.first, slot.second->deep_clone_impl(copies));
  copy->take_back_moved_leaves();
  return copy;
}

// Each wrapper child that holds leaves gives them back to their old places, newest wrapper and
// newest move first, so every leaf lands where it stood; the emptied wrapper goes.
void Module::take_back_moved_leaves() {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> wrappers;
  for (auto& slot : slots_)
    if (!slot.second->meta().moved_leaves.empty()) wrappers.push_back(slot);
  for (auto w = wrappers.rbegin(); w != wrappers.rend(); ++w) {
    const auto& [name, wrapper] = *w;
    const auto& moved = wrapper->meta().moved_leaves;
    for (auto it = moved.rbegin(); it != moved.rend(); ++it) {
      // the path's modules above the leaf: the old parent's in this module, the holders in the wrapper
      Module* old_parent = this;
      Module* holder = wrapper.get();
      size_t start = 0;
      for (size_t dot; (dot = it->path.find('.', start)) != std::string::npos; start = dot + 1) {
        std::string token = it->path.substr(start, dot - start);
        old_parent = old_parent->child(token).get();
        holder = holder->child(token).get();
      }
      std::string slot = it->path.substr(start);
      old_parent->insert_child(it->index, slot, holder->child(slot));
    }
    remove_child(name);
  }
}

Value Module::call(const std::string& name, Values args) const {
  return (*child(name))(std::move(args));
}

at::Tensor Module::call(const std::string& name, const at::Tensor& x) const {
  Value out = (*child(name))(Values{x});
  if (!out.isTensor())
    throw Error(fmt::format("{}: child '{}' ({}) returned {} where a tensor was expected", type_name_,
                            name, child(name)->type_name(), out.tagKind()));
  return out.toTensor();
}

std::vector<std::pair<std::string, at::Tensor>> unique_named_parameters(const torch::nn::Module& m) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  std::unordered_set<c10::TensorImpl*> seen;
  for (auto& p : m.named_parameters())
    if (p.value().defined() && seen.insert(p.value().unsafeGetTensorImpl()).second) out.emplace_back(p.key(), p.value());
  return out;
}

std::string unscheduled_name(const Module& root, const std::string& name) {
  std::string out;
  const Module* m = &root;
  for (size_t start = 0;;) {
    size_t dot = name.find('.', start);
    std::string token = name.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const Module* child = m && dot != std::string::npos && m->has_child(token) ? m->child(token).get() : nullptr;
    if (!child || child->meta().moved_leaves.empty()) out += (out.empty() ? "" : ".") + token;
    if (dot == std::string::npos) return out;
    m = child;
    start = dot + 1;
  }
}

std::unordered_map<c10::TensorImpl*, const ShardSpec*> shard_specs_by_tensor(const Module& root) {
  std::unordered_map<c10::TensorImpl*, const ShardSpec*> out;
  std::function<void(const Module&)> visit = [&](const Module& m) {
    for (auto& [name, spec] : m.meta().shards) {
      if (!m.has_param(name)) continue;  // a sharded buffer (running statistics): no gradient to gather
      out[m.param(name).unsafeGetTensorImpl()] = &spec;
    }
    for (auto& [name, spec] : m.meta().fully_sharded) out[m.param(name).unsafeGetTensorImpl()] = &spec;
    for (auto& [name, child] : m.children_in_order()) visit(*child);
  };
  visit(root);
  return out;
}

Splits splits_of(const Module& m, const std::string& name) {
  Splits out;
  if (auto s = m.meta().shards.find(name); s != m.meta().shards.end()) out.push_back(&s->second);
  if (auto f = m.meta().fully_sharded.find(name); f != m.meta().fully_sharded.end()) out.push_back(&f->second);
  return out;
}

std::unordered_map<c10::TensorImpl*, Splits> splits_by_tensor(const Module& root) {
  // a tie is recorded under each of its names, with equal specs: the first of each kind counts
  std::unordered_map<c10::TensorImpl*, const ShardSpec*> by_shard, by_fully_shard;
  std::function<void(const Module&)> visit = [&](const Module& m) {
    for (auto& [name, spec] : m.meta().shards)
      if (m.has_param(name)) by_shard.emplace(m.param(name).unsafeGetTensorImpl(), &spec);  // not a buffer
    for (auto& [name, spec] : m.meta().fully_sharded) by_fully_shard.emplace(m.param(name).unsafeGetTensorImpl(), &spec);
    for (auto& [name, child] : m.children_in_order()) visit(*child);
  };
  visit(root);
  std::unordered_map<c10::TensorImpl*, Splits> out;
  for (auto& [impl, spec] : by_shard) out[impl].push_back(spec);
  for (auto& [impl, spec] : by_fully_shard) out[impl].push_back(spec);  // of shard's slice
  return out;
}

std::unordered_set<const c10::TensorImpl*> fully_sharded_tensors(const Module& root) {
  std::unordered_set<const c10::TensorImpl*> out;
  std::function<void(const Module&)> visit = [&](const Module& m) {
    for (auto& [name, spec] : m.meta().fully_sharded) out.insert(m.param(name).unsafeGetTensorImpl());
    for (auto& [name, child] : m.children_in_order()) visit(*child);
  };
  visit(root);
  return out;
}

std::unordered_map<const c10::TensorImpl*, int64_t> fully_sharded_numels(const Module& root) {
  std::unordered_map<const c10::TensorImpl*, int64_t> out;
  std::function<void(const Module&)> visit = [&](const Module& m) {
    for (auto& [name, spec] : m.meta().fully_sharded)
      out[m.param(name).unsafeGetTensorImpl()] = c10::multiply_integers(spec.full_shape);
    for (auto& [name, child] : m.children_in_order()) visit(*child);
  };
  visit(root);
  return out;
}

int64_t ShardSpec::part_stride() const {
  int64_t section = full_shape[axis] / groups;
  return (section + parts - 1) / parts;
}

int64_t ShardSpec::part_size(int r) const {
  int64_t section = full_shape[axis] / groups, stride = part_stride();
  return std::clamp<int64_t>(section - r * stride, 0, stride);
}

at::Tensor ShardSpec::local(const at::Tensor& full) const {
  // a part past the section's end is empty, and starts at the end (narrow takes no start beyond it)
  int64_t section = full.size(axis) / groups, start = std::min(rank * part_stride(), section), size = part_size(rank);
  std::vector<at::Tensor> pieces;
  for (int g = 0; g < groups; ++g) pieces.push_back(full.narrow(axis, g * section + start, size));
  return groups == 1 ? pieces[0] : at::cat(pieces, axis);
}

at::Tensor ShardSpec::padded(const at::Tensor& local) const {
  int64_t size = part_size(rank), missing = part_stride() - size;
  if (missing == 0) return local;
  std::vector<at::Tensor> pieces;
  auto pad_sizes = local.sizes().vec();
  pad_sizes[axis] = missing;
  at::Tensor pad = at::zeros(pad_sizes, local.options().requires_grad(false));
  for (int g = 0; g < groups; ++g) {
    pieces.push_back(local.narrow(axis, g * size, size));
    pieces.push_back(pad);
  }
  return at::cat(pieces, axis);
}

at::Tensor ShardSpec::regroup(const at::Tensor& gathered) const {
  const int64_t stride = part_stride();
  if (groups == 1)  // the parts are in order, each padded at its end, and only the last ones short
    return stride * parts == full_shape[axis] ? gathered : gathered.narrow(axis, 0, full_shape[axis]);
  // gathered = [r0: s0 s1 s2][r1: s0 s1 s2]...; the full tensor is [s0: r0 r1][s1: r0 r1]...
  std::vector<at::Tensor> pieces;
  for (int g = 0; g < groups; ++g)
    for (int r = 0; r < parts; ++r) pieces.push_back(gathered.narrow(axis, (r * groups + g) * stride, part_size(r)));
  return at::cat(pieces, axis);
}

namespace {
void collect_tensors(const Value& v, std::vector<at::Tensor>& out) {
  if (v.isTensor()) out.push_back(v.toTensor());
  else if (v.isTuple()) for (auto& e : v.toTupleRef().elements()) collect_tensors(e, out);
  else if (v.isList()) for (const Value& e : v.toListRef()) collect_tensors(e, out);
  else if (v.isGenericDict()) for (auto& e : v.toGenericDict()) collect_tensors(e.value(), out);
}
}  // namespace

std::vector<at::Tensor> tensors_in(const Value& v) {
  std::vector<at::Tensor> out;
  collect_tensors(v, out);
  return out;
}

at::Tensor tensor_arg(const Values& args, size_t i, const char* module, const char* what) {
  if (i >= args.size() || !args[i].isTensor())
    throw Error(fmt::format("{}: argument {} ({}) must be a tensor, got {}", module, i + 1, what,
                            i < args.size() ? args[i].tagKind() : std::string("nothing")));
  return args[i].toTensor();
}

c10::optional<c10::impl::GenericDict> kwargs_arg(const Values& args, size_t i) {
  if (i < args.size() && args[i].isGenericDict()) return args[i].toGenericDict();
  return c10::nullopt;
}

void check_kwargs(const c10::optional<c10::impl::GenericDict>& kw, const std::vector<std::string>& valid,
                  const std::string& module, const std::vector<std::string>& flags) {
  if (!kw) return;
  for (const auto& entry : *kw) {
    std::string key = entry.key().isString() ? entry.key().toStringRef() : entry.key().tagKind();
    if (std::find(valid.begin(), valid.end(), key) != valid.end()) {
      if (!entry.value().isTensor() && !entry.value().isNone())
        throw Error(fmt::format("{}: keyword '{}' must be a tensor, got {}", module, key, entry.value().tagKind()));
      continue;
    }
    if (std::find(flags.begin(), flags.end(), key) != flags.end()) {
      if (!entry.value().isBool() && !entry.value().isNone())
        throw Error(fmt::format("{}: keyword '{}' must be true or false, got {}", module, key, entry.value().tagKind()));
      continue;
    }
    std::vector<std::string> all = valid;
    all.insert(all.end(), flags.begin(), flags.end());
    auto near = closest_names(key, all, 1);
    throw Error(fmt::format("{}: unknown keyword '{}'{} (valid: {})", module, key,
                            near.empty() ? "" : fmt::format(" (did you mean '{}'?)", near[0]), fmt::join(all, ", ")));
  }
}

c10::optional<bool> kwarg_flag(const c10::optional<c10::impl::GenericDict>& kw, const std::string& key) {
  if (!kw) return c10::nullopt;
  auto it = kw->find(key);
  if (it == kw->end() || it->value().isNone()) return c10::nullopt;
  if (!it->value().isBool()) throw Error(fmt::format("keyword '{}' must be true or false, got {}", key, it->value().tagKind()));
  return it->value().toBool();
}

c10::optional<at::Tensor> kwarg_tensor(const c10::optional<c10::impl::GenericDict>& kw,
                                       const std::string& key) {
  if (!kw) return c10::nullopt;
  auto it = kw->find(key);
  if (it == kw->end() || it->value().isNone()) return c10::nullopt;
  if (!it->value().isTensor())
    throw Error(fmt::format("keyword '{}' must be a tensor, got {}", key, it->value().tagKind()));
  return it->value().toTensor();
}

}  // namespace slapo
