// from_pretrained / save_pretrained over config.json and safetensors.
#include "io/pretrained.h"

#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/expert_groups.h"
#include "distributed/group.h"
#include "distributed/split_tensors.h"
#include "distributed/world.h"
#include "io/atomic_file.h"
#include "io/checkpoint_reader.h"
#include "io/json_file.h"
#include "io/safetensors.h"

namespace slapo {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Buffers that older HF checkpoints carry but the models recompute.
bool is_recomputed_buffer(const std::string& key) {
  return ends_with(key, ".attn.bias") || ends_with(key, ".attn.masked_bias") || ends_with(key, "position_ids") ||
         ends_with(key, "rotary_emb.inv_freq");
}

// The dtype a checkpoint was saved in: config.json's dtype (5.x) or torch_dtype (4.x), else the
// first floating tensor's, else float32.
at::ScalarType checkpoint_dtype(const nlohmann::json& fields, const NamedTensors& tensors) {
  for (const char* key : {"dtype", "torch_dtype"}) {
    if (!fields.contains(key) || !fields[key].is_string()) continue;
    const std::string name = fields[key].get<std::string>();
    if (name == "float32") return at::kFloat;
    if (name == "bfloat16") return at::kBFloat16;
    if (name == "float16") return at::kHalf;
    if (name == "float64") return at::kDouble;
    if (name != "auto")
      throw Error(fmt::format("from_pretrained: config.json's {} '{}' is not supported (float32, float16, bfloat16, "
                              "float64)", key, name));
  }
  for (auto& [name, t] : tensors)
    if (t.is_floating_point()) return t.scalar_type();
  return at::kFloat;
}

const char* dtype_field_name(at::ScalarType dtype) {
  switch (dtype) {
    case at::kBFloat16: return "bfloat16";
    case at::kHalf: return "float16";
    case at::kDouble: return "float64";
    default: return "float32";
  }
}

}  // namespace

namespace {

// Which parameter of `model` each checkpoint key fills, checked before anything is written: the
// shapes agree and every parameter gets a value. Checkpoints of the base model (keys without
// "transformer." / "bert." / "model.") match too.
struct WeightMatch {
  std::vector<std::tuple<at::Tensor, std::string, at::Tensor>> fills;  // (parameter, key, value)
  std::vector<std::string> ignored;                                     // keys the model does not have
};

WeightMatch match_weights(Module& model, const NamedTensors& tensors, const std::string& source) {
  // by unscheduled name: a checkpoint names a leaf a wrapper took where the model first had it
  torch::OrderedDict<std::string, at::Tensor> params;
  for (auto& p : model.named_parameters()) params.insert(unscheduled_name(model, p.key()), p.value());
  std::vector<std::string> base_prefixes;
  for (auto& [name, child] : model.children_in_order()) base_prefixes.push_back(name + ".");
  WeightMatch out;
  std::unordered_set<c10::TensorImpl*> filled;
  for (auto& [key, value] : tensors) {
    at::Tensor* target = params.find(key);
    for (size_t i = 0; !target && i < base_prefixes.size(); ++i) target = params.find(base_prefixes[i] + key);
    if (!target) {
      if (!is_recomputed_buffer(key)) out.ignored.push_back(key);
      continue;
    }
    if (target->sizes() != value.sizes())
      throw Error(fmt::format("from_pretrained: '{}' in {} has shape [{}] but the model's parameter has [{}]", key,
                              source, fmt::join(value.sizes(), ", "), fmt::join(target->sizes(), ", ")));
    out.fills.emplace_back(*target, key, value);
    filled.insert(target->unsafeGetTensorImpl());
  }
  std::vector<std::string> missing;
  for (auto& p : params)
    if (p.value().defined() && !filled.count(p.value().unsafeGetTensorImpl())) missing.push_back(p.key());
  if (!missing.empty()) {
    if (missing.size() > 5) missing.resize(5), missing.push_back("...");
    throw Error(fmt::format("from_pretrained: {} has no weights for {}", source, join_or_none(missing)));
  }
  return out;
}

// A model on the meta device keeps, per parameter, where its values are (ModuleMeta::sources);
// build reads each rank's slice from there.
void record_sources(Module& model, const WeightMatch& match, const std::shared_ptr<const CheckpointReader>& reader) {
  std::unordered_map<c10::TensorImpl*, std::string> key_of;
  for (auto& [target, key, value] : match.fills) key_of.emplace(target.unsafeGetTensorImpl(), key);
  std::function<void(Module&)> visit = [&](Module& m) {
    for (auto& p : m.named_parameters(/*recurse=*/false)) {
      auto found = p.value().defined() ? key_of.find(p.value().unsafeGetTensorImpl()) : key_of.end();
      if (found != key_of.end()) m.meta().sources[p.key()] = ParamSource{reader, found->second};
    }
    for (auto& [name, child] : m.children_in_order()) visit(*child);
  };
  visit(model);
}

}  // namespace

std::vector<std::string> load_weights(Module& model, const NamedTensors& tensors, const std::string& source) {
  auto match = match_weights(model, tensors, source);
  torch::NoGradGuard no_grad;
  for (auto& [target, key, value] : match.fills) target.copy_(value);
  return match.ignored;
}

std::shared_ptr<Module> from_pretrained(const std::string& dir, const BuildOptions& options) {
  fs::path config_path = fs::path(dir) / "config.json";
  if (!fs::exists(config_path))
    throw Error(fmt::format("from_pretrained: '{}' has no config.json (is it a Hugging Face model directory?)", dir));
  nlohmann::json fields = read_json_file(config_path.string(), "from_pretrained");
  if (!fields.contains("model_type"))
    throw Error(fmt::format("from_pretrained: '{}' has no model_type (supported: bert, roberta, albert, t5, gpt2, gpt_neo, opt, llama, qwen2, mistral, mixtral, mlp)", config_path.string()));
  // Mapped, not read: weights are copied straight from the files into the parameters, or on the
  // meta device each rank reads its slices at build.
  auto reader = std::make_shared<const CheckpointReader>(dir);
  auto tensors = reader->views();
  BuildOptions no_init = options;
  no_init.init_weights = false;
  if (options.dtype_from_checkpoint)
    no_init.tensor_options = options.tensor_options.dtype(checkpoint_dtype(fields, tensors));
  auto model = build_model(ModelConfig(fields), no_init);
  auto match = match_weights(*model, tensors, "'" + dir + "'");
  if (no_init.tensor_options.device().is_meta()) {
    record_sources(*model, match, reader);
  } else {
    torch::NoGradGuard no_grad;
    for (auto& [target, key, value] : match.fills) {
      target.copy_(value);
      reader->release(key);  // the file's pages leave this process: the model is held once
    }
  }
  if (!match.ignored.empty())
    fmt::print(stderr, "from_pretrained: ignored {} checkpoint entr{} the model does not have (e.g. {})\n",
               match.ignored.size(), match.ignored.size() == 1 ? "y" : "ies", match.ignored.front());
  return model;
}

bool elected_writer(bool holds_full_model, const char* caller) {
  auto world = dist::world();
  auto mine = torch::tensor({holds_full_model ? static_cast<int64_t>(world->rank()) : INT64_MAX});
  auto all = world->all_gather(mine, 0, caller);
  int64_t writer = all.min().item<int64_t>();
  if (writer == INT64_MAX) throw Error(fmt::format("{}: no rank ended up with the whole model to write", caller));
  return writer == world->rank();
}

void write_pretrained(const Module& model, const std::string& dir, const NamedTensors& scheduled_names,
                      int64_t max_shard_bytes) {
  // on disk under the model's own names: a leaf checkpoint/fuse moved into a wrapper is saved
  // where from_pretrained of the unscheduled model looks for it
  NamedTensors tensors;
  for (auto& [name, t] : scheduled_names) tensors.emplace_back(unscheduled_name(model, name), t);
  write_checkpoint_dir(dir, tensors, max_shard_bytes);
  if (const ModelConfig* config = model_config(model)) {
    // The dtype the weights are written in, under the names transformers 5.x and 4.x read.
    nlohmann::json fields = config->json();
    for (auto& [name, t] : tensors)
      if (t.is_floating_point()) {
        fields["dtype"] = fields["torch_dtype"] = dtype_field_name(t.scalar_type());
        break;
      }
    write_file_atomically((fs::path(dir) / "config.json").string(),
                          [&](std::ostream& out) { out << fields.dump(2) << "\n"; }, "save");
  }
}

NamedTensors gather_shards(Schedule& sch, const std::vector<std::pair<std::string, at::Tensor>>& params,
                           const char* caller) {
  auto splits = splits_by_tensor(*sch.mod());
  NamedTensors full;
  for (auto& [name, param] : params) {
    auto found = splits.find(param.unsafeGetTensorImpl());
    at::Tensor value = param.detach();
    if (found != splits.end())  // a collective: every rank walks the parameters in the same order
      value = gather_whole(found->second, value, caller);
    full.emplace_back(name, value);
  }
  return full;
}

namespace {
// Every expert of each block shard_experts spread over ranks, gathered from the ranks of its group
// (each holds experts rank x E/N .. (rank + 1) x E/N - 1): `tensors` loses this rank's experts and
// gains all of them, in expert order. A collective over each block's group, in module order.
void gather_experts(const Module& model, NamedTensors& tensors) {
  for (auto& [path, id] : expert_parallel_blocks(model)) {
    auto group = dist::group_by_id(id);
    const std::string prefix = path + ".experts.";
    std::map<int64_t, std::vector<std::pair<std::string, at::Tensor>>> held;  // expert id -> its parameters
    NamedTensors rest;
    for (auto& [name, t] : tensors) {
      if (name.rfind(prefix, 0) != 0) {
        rest.emplace_back(name, t);
        continue;
      }
      auto dot = name.find('.', prefix.size());
      held[std::stoll(name.substr(prefix.size(), dot - prefix.size()))].emplace_back(name.substr(dot + 1), t);
    }
    if (held.empty()) throw Error(fmt::format("save: '{}' holds no expert on this rank", path));
    const auto& layout = held.begin()->second;  // every expert has the same parameters
    for (size_t i = 0; i < layout.size(); ++i) {
      std::vector<at::Tensor> mine;
      for (auto& [expert, params] : held) mine.push_back(params[i].second.detach());
      auto all = group->all_gather(at::stack(mine), 0, "save");  // [E, ...], in rank order
      for (int64_t e = 0; e < all.size(0); ++e)
        rest.emplace_back(fmt::format("{}{}.{}", prefix, e, layout[i].first), all[e]);
    }
    tensors = std::move(rest);
  }
}
}  // namespace

void save_consolidated(Schedule& sch, const std::string& dir, int64_t max_shard_bytes) {
  auto full = gather_shards(sch, unique_named_parameters(*sch.mod()), "save");
  gather_experts(*sch.mod(), full);
  // Each tensor-parallel group now holds the whole model; one rank of the world writes it.
  if (elected_writer(sch.group()->rank() == 0, "save")) write_pretrained(*sch.mod(), dir, full, max_shard_bytes);
}

void save_pretrained(Module& model, const std::string& dir, int64_t max_shard_bytes) {
  NamedTensors unique = unique_named_parameters(model);
  std::unordered_set<c10::TensorImpl*> seen;
  for (auto& p : unique) seen.insert(p.second.unsafeGetTensorImpl());
  for (auto& b : model.named_buffers())
    if (seen.insert(b.value().unsafeGetTensorImpl()).second) unique.emplace_back(b.key(), b.value());
  if (!expert_parallel_blocks(model).empty()) {  // each rank holds some experts: gathered, one rank writes
    gather_experts(model, unique);
    if (!elected_writer(dist::world()->rank() == 0, "save")) return;
  }
  write_pretrained(model, dir, unique, max_shard_bytes);
}

}  // namespace slapo
