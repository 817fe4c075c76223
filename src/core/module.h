// The one module type every schedule node holds: LibTorch zoo layers, Lua-defined modules,
// TorchScript modules and (later) traced graphs all share this calling convention.
#pragma once

#include <torch/torch.h>

#include <functional>
#include <map>
#include <unordered_map>
#include <string>
#include <unordered_set>
#include <vector>

namespace slapo {

using Value = c10::IValue;
using Values = std::vector<c10::IValue>;

/// How `shard` split a parameter: along `axis`, from `full_shape`, into `parts`; this rank
/// keeps part `rank`. With `groups` > 1 the axis holds that many equal sections (a fused QKV
/// projection) and each section is split alike, so every rank keeps its part of each.
/// A section the parts do not divide (fully_shard's rows; shard's always divide) is split as
/// torch.chunk does: every part ceil(section / parts) long but the last ones, which hold the rest
/// (possibly nothing). Collectives send each part padded to the longest (`padded`).
struct ShardSpec {
  int64_t axis;
  std::vector<int64_t> full_shape;
  int parts;
  int rank;
  int groups = 1;
  int group_id = 0;  ///< the dist group whose ranks hold the parts (0: the world)

  /// The longest part of one section along `axis`, and where part r of a section starts in it.
  int64_t part_stride() const;
  /// How long part r of one section is along `axis`.
  int64_t part_size(int r) const;
  /// This rank's part of a full-size tensor.
  at::Tensor local(const at::Tensor& full) const;
  /// This rank's part with each section's piece padded (zeros) to part_stride(): the same size on
  /// every rank, as all-gather and reduce-scatter need.
  at::Tensor padded(const at::Tensor& local) const;
  /// The full tensor from every rank's padded part concatenated along `axis` in rank order.
  at::Tensor regroup(const at::Tensor& gathered) const;
};

/// What primitives record on a module; it travels with the module (replace, clone, build).
class TracedGraph;
class CheckpointReader;

/// Where a parameter left on the meta device by from_pretrained gets its values: an entry of a
/// mapped checkpoint. build reads each rank's slice of it, and nothing more.
struct ParamSource {
  std::shared_ptr<const CheckpointReader> reader;
  std::string key;  ///< the checkpoint's name for the tensor
};

struct ModuleMeta {
  std::map<std::string, ShardSpec> shards;                          ///< by parameter name
  std::map<std::string, std::map<std::string, Value>> annotations;  ///< parameter -> key -> value
  std::shared_ptr<at::Tensor> rng_state;  ///< fork_rng: this module's own CPU generator state
  bool checkpointed = false;              ///< checkpoint: recomputed in backward
  bool decomposed = false;                ///< decompose: Linear/Conv1D as matmul + bias add
  std::shared_ptr<TracedGraph> graph;     ///< trace: the graph that runs as this module's forward
  bool ends_stage = false;                ///< cut_pipeline_stage: a pipeline stage ends after it
  /// fully_shard: parameters kept as 1/N along axis 0 between calls, by name. Apart from `shards`:
  /// a call sees them whole, so forward code must not read them as tensor-parallel slices.
  std::map<std::string, ShardSpec> fully_sharded;
  bool fully_shard_root = false;  ///< fully_shard was applied here: its calls gather the subtree
  /// shard_experts: the group over which this MoE block's experts are spread (its parameters below
  /// `experts` hold this rank's experts alone, their gradients averaged by the block); -1 none
  int expert_group = -1;
  std::map<std::string, ParamSource> sources;  ///< from_pretrained on meta: by parameter name
  /// checkpoint/fuse of a subgraph: the leaves this wrapper took from the traced module it sits
  /// in, in the order taken, each by its path below that module and the place it held among its
  /// old parent's children. unscheduled_name leaves a wrapper holding leaves out.
  struct MovedLeaf {
    std::string path;
    size_t index;
  };
  std::vector<MovedLeaf> moved_leaves;
};

/// Base of every schedulable module.
///
/// - `forward` takes IValues and returns one IValue, so a parent can call any child alike.
/// - Children live in named slots; a parent calls a child through `call(name, ...)`, so a child
///   swapped by `replace` takes effect without touching the parent's code.
/// - Sizes come from parameter shapes at run time (see DESIGN.md), never from cached config.
class Module : public torch::nn::Module {
 public:
  explicit Module(std::string type_name);
  Module(const Module& other);
  ~Module() override;

  /// The class name users see and `replace_all` matches on ("BertSelfAttention", "Linear").
  const std::string& type_name() const { return type_name_; }

  /// Runs the module: fwd_pre hooks, forward, fwd_post hooks (through the call wrapper if set).
  Value operator()(Values args);
  /// Shape, dtype and device of each tensor argument of the last call (non-tensors: empty shape,
  /// Undefined dtype): `trace` without inputs draws example inputs like them. Values are not kept.
  struct ArgSpec {
    std::vector<int64_t> shape;
    at::ScalarType dtype = at::ScalarType::Undefined;
    at::Device device = at::kCPU;
  };
  const std::vector<ArgSpec>& last_call() const { return last_call_; }

  /// Runs the module's own forward (no hooks, no wrapper): what `trace` records.
  Value forward_only(Values args) { return forward_override_ ? forward_override_(std::move(args)) : forward(std::move(args)); }
  /// Replaces forward (hooks and the call wrapper still apply): `trace` runs its graph here.
  /// Copies (clone) do not keep it: they run the eager forward the graph was traced from.
  void set_forward_override(std::function<Value(Values)> fn) { forward_override_ = std::move(fn); }
  bool has_forward_override() const { return static_cast<bool>(forward_override_); }

  /// What `checkpoint` installs: it receives the arguments and the plain call to run them.
  using CallWrapper = std::function<Value(Module&, Values, const std::function<Value(Values)>&)>;
  void set_call_wrapper(CallWrapper wrapper) { wrapper_ = std::move(wrapper); }
  const CallWrapper& call_wrapper() const { return wrapper_; }
  at::Tensor operator()(const at::Tensor& x) { return (*this)(Values{x}).toTensor(); }

  /// Child access by slot name.
  bool has_child(const std::string& name) const;
  std::shared_ptr<Module> child(const std::string& name) const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_in_order() const;
  /// True when `other` is this module or one in its subtree.
  bool contains(const Module* other) const;
  /// Adds a new slot or swaps the module in an existing one.
  void set_child(const std::string& name, std::shared_ptr<Module> module);
  /// Takes the child out of slot `name` (which must exist); returns the slot's place among the children.
  size_t remove_child(const std::string& name);
  /// Adds a new slot `name` at place `index` among the children (the end when past it).
  void insert_child(size_t index, const std::string& name, std::shared_ptr<Module> module);

  /// Parameters by name, on this module only (no recursion).
  at::Tensor param(const std::string& name) const;
  bool has_param(const std::string& name) const;
  /// Adds or swaps a parameter (a swap keeps its position among the parameters).
  void set_param(const std::string& name, at::Tensor value);

  /// A deep copy: fresh parameter storage, tied parameters stay tied inside the copy. Like a
  /// traced module's copy, which runs the eager forward it was traced from, a copy has the leaves
  /// that checkpoint/fuse wrappers took back in their old places and no such wrappers.
  std::shared_ptr<Module> deep_clone() const;

  /// One line of settings for the tree printer ("p=0.1", "eps=1e-12"); empty for none.
  virtual std::string describe() const { return ""; }

  using PreHook = std::function<void(Module&, Values&)>;
  using PostHook = std::function<void(Module&, const Values&, Value&)>;
  /// Hooks run in the order added; each call returns an id for remove_hook.
  int add_forward_pre_hook(PreHook hook);
  int add_forward_post_hook(PostHook hook);
  void remove_hook(int id);

  /// The span name this module's calls get in a profile ("GPT2Attention transformer.h.0.attn");
  /// create_schedule labels every module with its path.
  void set_profile_label(std::string label) { profile_label_ = std::move(label); }
  /// The path create_schedule gave this module ("transformer.h.0.attn"): "" for a root or a module
  /// no schedule holds. An error raised inside a call starts with the innermost such path.
  std::string schedule_path() const;

  /// True when a call runs nothing but forward: no hooks, call wrapper (checkpoint), forward
  /// override (trace) or forked random stream. Fast paths that bypass a child's call use it.
  bool runs_plain() const;
  /// Parameters this module's forward uses that live in other modules (a graph cut out of a
  /// trace calls the traced module's leaves): checkpoint routes their gradients too.
  virtual std::vector<at::Tensor> borrowed_parameters() const { return {}; }
  /// How many forward hooks (syncs among them) run around this module's calls.
  size_t hook_count() const { return pre_hooks_.size() + post_hooks_.size(); }
  size_t pre_hook_count() const { return pre_hooks_.size(); }
  size_t post_hook_count() const { return post_hooks_.size(); }
  /// A module's hooks with their ids: replace takes them off a leaf it swallows and gives them to
  /// the module that takes the leaf's place (or back, when the replace fails).
  struct Hooks {
    std::vector<std::pair<int, PreHook>> pre;
    std::vector<std::pair<int, PostHook>> post;
  };
  Hooks take_hooks();
  /// Appends `hooks` after this module's own, keeping their order and ids.
  void give_hooks(Hooks hooks);

  ModuleMeta& meta() { return meta_; }
  const ModuleMeta& meta() const { return meta_; }

  /// Everything a primitive may change on this module object (its own slots, parameters, buffers,
  /// hooks, call wrapper, forward override and meta), not its children's. A schedule snapshot
  /// keeps one per module and puts it back in place, so handles to the module stay valid.
  struct SavedState;
  std::shared_ptr<const SavedState> save_state() const;
  void restore_state(const SavedState& saved);

  /// How many slapo::Module objects are alive (lifetime tests use it).
  static int64_t live_count();

 protected:
  virtual Value forward(Values args) = 0;
  /// Runs after the fwd_post hooks; a row-parallel Linear adds its bias here, after the
  /// all-reduce a sync inserted, as Megatron's RowParallelLinear does.
  virtual Value finish(Value out) { return out; }
  /// A copy of this object sharing parameters and children; deep_clone fixes both up.
  virtual std::shared_ptr<Module> shallow_copy() const = 0;

  /// Calls child `name` with `args`.
  Value call(const std::string& name, Values args) const;
  at::Tensor call(const std::string& name, const at::Tensor& x) const;

  /// deep_clone's worker; `copies` maps each original tensor to its copy (keeps ties).
  virtual std::shared_ptr<Module> deep_clone_impl(
      std::unordered_map<c10::TensorImpl*, at::Tensor>& copies) const;

 private:

  std::string type_name_;
  std::string profile_label_;
  ModuleMeta meta_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> slots_;
  Value call_unwrapped(Values args);
  /// deep_clone's last step on a copy: its wrappers' leaves back where they were (ModuleMeta::moved_leaves).
  void take_back_moved_leaves();
  [[noreturn]] void rethrow_located(const char* what) const;

  CallWrapper wrapper_;
  std::function<Value(Values)> forward_override_;
  std::vector<ArgSpec> last_call_;
  std::vector<std::pair<int, PreHook>> pre_hooks_;
  std::vector<std::pair<int, PostHook>> post_hooks_;
};

struct Module::SavedState {
  torch::nn::Module base;  ///< LibTorch's registries: parameters, buffers, children, training flag
  std::string profile_label;
  ModuleMeta meta;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> slots;
  CallWrapper wrapper;
  std::function<Value(Values)> forward_override;
  std::vector<std::pair<int, PreHook>> pre_hooks;
  std::vector<std::pair<int, PostHook>> post_hooks;
};

/// CRTP helper that gives a concrete module its shallow copy.
template <class Derived>
class ModuleBase : public Module {
 public:
  using Module::Module;

 protected:
  std::shared_ptr<Module> shallow_copy() const override {
    return std::make_shared<Derived>(static_cast<const Derived&>(*this));
  }
};

/// Every defined parameter once (tied ones under their first name), in module order, as
/// PyTorch's named_parameters() deduplicates.
std::vector<std::pair<std::string, at::Tensor>> unique_named_parameters(const torch::nn::Module& m);

/// A parameter's or module's name below `root` as the model had it before checkpoint/fuse of a
/// subgraph moved leaves into wrappers ("attn.CheckPointWrapper_0.q.weight" -> "attn.q.weight"):
/// the name Hugging Face checkpoints (save, from_pretrained) and verify's unscheduled model use.
std::string unscheduled_name(const Module& root, const std::string& name);

/// The shard spec of every sharded parameter below `root`, by tensor (ties included).
std::unordered_map<c10::TensorImpl*, const ShardSpec*> shard_specs_by_tensor(const Module& root);

/// How a parameter is split, outermost first: shard's tensor-parallel slice of the whole tensor,
/// then fully_shard's slice of that (2-D: TP inside, fully sharded DP across). Empty: whole.
using Splits = std::vector<const ShardSpec*>;

/// How `m` keeps its parameter or buffer `name` (its own records; a tie is recorded under each name).
Splits splits_of(const Module& m, const std::string& name);

/// The splits of every split parameter below `root`, by tensor (ties included).
std::unordered_map<c10::TensorImpl*, Splits> splits_by_tensor(const Module& root);

/// The parameters below `root` that fully_shard keeps as slices (its backward averages their
/// gradients over its group), by tensor.
std::unordered_set<const c10::TensorImpl*> fully_sharded_tensors(const Module& root);
/// The same parameters' whole element counts (what each call gathers and computes with), by tensor.
std::unordered_map<const c10::TensorImpl*, int64_t> fully_sharded_numels(const Module& root);

/// The tensors inside a value (a tensor, or tuples, lists and dicts of them), in order.
std::vector<at::Tensor> tensors_in(const Value& v);

/// Argument helpers for forward implementations.
at::Tensor tensor_arg(const Values& args, size_t i, const char* module, const char* what);
/// The keyword table a caller passed as the last argument (`model(ids, {labels = t})`), or none.
c10::optional<c10::impl::GenericDict> kwargs_arg(const Values& args, size_t i);
/// Refuses a keyword not in `valid` or `flags` ({lables = ...} would otherwise be ignored), one of
/// `valid` that is not a tensor, or one of `flags` that is not true or false, naming `module`.
void check_kwargs(const c10::optional<c10::impl::GenericDict>& kw, const std::vector<std::string>& valid,
                  const std::string& module, const std::vector<std::string>& flags = {});
/// A true/false keyword (check_kwargs's `flags`), or none when it is absent or nil.
c10::optional<bool> kwarg_flag(const c10::optional<c10::impl::GenericDict>& kw, const std::string& key);
c10::optional<at::Tensor> kwarg_tensor(const c10::optional<c10::impl::GenericDict>& kw,
                                       const std::string& key);

}  // namespace slapo
