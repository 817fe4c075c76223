// GPTNeoForCausalLM with Hugging Face's module names: GPT-2's outline with Linear projections,
// unscaled attention computed in float32, and layers that alternate global and local (windowed)
// attention as config.attention_types lists them.
#include <algorithm>

#include "core/error.h"
#include "models/causal_lm.h"
#include "models/config_check.h"
#include "models/layers.h"
#include "models/transformer_ops.h"
#include "models/zoo.h"

namespace slapo {

namespace {

// GPT-Neo's attention per layer ("global" or "local"), expanded from config.attention_types as
// transformers does; refuses a list that does not name one per layer.
std::vector<std::string> gpt_neo_attention_layers(const ModelConfig& c) {
  const auto& f = c.json();
  auto bad = [&](const std::string& why) {
    return Error(fmt::format("config: gpt_neo field 'attention_types' {} (a list of [[\"global\" | \"local\", ...], "
                             "repeats] pairs, e.g. [[[\"global\", \"local\"], 12]]), got {}",
                             why, f.contains("attention_types") ? f["attention_types"].dump() : "nothing"));
  };
  if (!f.contains("attention_types") || !f["attention_types"].is_array()) throw bad("must be given");
  std::vector<std::string> layers;
  for (auto& item : f["attention_types"]) {
    if (!item.is_array() || item.size() != 2 || !item[0].is_array() || !item[1].is_number_integer() ||
        item[1].get<int64_t>() < 0 || item[1].get<int64_t>() > 4096)
      throw bad("holds an entry that is no pair");
    for (int64_t r = 0; r < item[1].get<int64_t>(); ++r)
      for (auto& kind : item[0]) {
        if (kind != "global" && kind != "local") throw bad("names an attention other than \"global\" and \"local\"");
        layers.push_back(kind.get<std::string>());
      }
  }
  int64_t n = c.integer("num_layers");
  if (static_cast<int64_t>(layers.size()) != n)
    throw Error(fmt::format("config: gpt_neo field 'attention_types' lists {} layers but num_layers is {}; list one "
                            "attention per layer", layers.size(), n));
  // transformers derives attention_layers from attention_types; a config.json carries both
  if (c.has("attention_layers") && f["attention_layers"] != nlohmann::json(layers))
    throw Error(fmt::format("config: gpt_neo field 'attention_layers' {} disagrees with attention_types, which "
                            "expands to {}; drop attention_layers or make them agree",
                            f["attention_layers"].dump(), nlohmann::json(layers).dump()));
  return layers;
}


class GPTNeoSelfAttention : public ModuleBase<GPTNeoSelfAttention> {
 public:
  GPTNeoSelfAttention(const ModelConfig& c, const at::TensorOptions& o, std::string kind)
      : ModuleBase("GPTNeoSelfAttention"), attention_type(std::move(kind)) {
    int64_t h = c.integer("hidden_size");
    head_dim = head_dim_of(c, "hidden_size", "num_heads");
    set_child("attn_dropout", std::make_shared<Dropout>(c.number("attention_dropout", 0.0)));
    set_child("resid_dropout", std::make_shared<Dropout>(c.number("resid_dropout", 0.0)));
    set_child("k_proj", std::make_shared<Linear>(h, h, false, o));
    set_child("v_proj", std::make_shared<Linear>(h, h, false, o));
    set_child("q_proj", std::make_shared<Linear>(h, h, false, o));
    set_child("out_proj", std::make_shared<Linear>(h, h, true, o));
    impl = attention_impl_from_config(c.str("attn_implementation", "auto"));
  }
  std::string describe() const override { return fmt::format("{}, head_dim={}", attention_type, head_dim); }
  std::string attention_type;
  int64_t head_dim;
  AttentionImpl impl;

 protected:
  // (hidden_states, additive mask or nil: causal then). GPT-Neo does not scale the scores.
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "GPTNeoSelfAttention", "hidden_states");
    c10::optional<at::Tensor> mask;
    if (args.size() > 1 && args[1].isTensor()) mask = args[1].toTensor();
    auto q = split_heads(call("q_proj", x), head_dim), k = split_heads(call("k_proj", x), head_dim);
    auto v = split_heads(call("v_proj", x), head_dim);
    auto dropout = [&](const at::Tensor& probs) { return call("attn_dropout", probs); };
    at::Tensor context;
    if (q.scalar_type() == at::kFloat || q.scalar_type() == at::kDouble) {
      context = attention_context(q, k, v, mask, /*causal=*/true, impl, plain_dropout_rate(*child("attn_dropout")),
                                  dropout, /*scale=*/1.0);
    } else {  // half precision: scores and softmax in float32 as transformers does (unscaled scores overflow)
      if (!mask) mask = additive_mask(c10::nullopt, q.size(2), k.size(2), /*causal=*/true, q.options().dtype(at::kFloat));
      auto probs = attention_probs(q.to(at::kFloat), k.to(at::kFloat), mask->to(at::kFloat), 1.0);
      context = at::matmul(dropout(probs.to(v.scalar_type())), v);
    }
    return call("resid_dropout", call("out_proj", merge_heads(context)));
  }
};

// transformers' GPTNeoAttention holds the self-attention under `attention`.
class GPTNeoAttention : public ModuleBase<GPTNeoAttention> {
 public:
  GPTNeoAttention(const ModelConfig& c, const at::TensorOptions& o, const std::string& kind)
      : ModuleBase("GPTNeoAttention") {
    set_child("attention", std::make_shared<GPTNeoSelfAttention>(c, o, kind));
  }

 protected:
  Value forward(Values args) override { return call("attention", std::move(args)); }
};

class GPTNeoMLP : public ModuleBase<GPTNeoMLP> {
 public:
  GPTNeoMLP(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("GPTNeoMLP") {
    int64_t h = c.integer("hidden_size"), inner = c.integer("intermediate_size", 4 * h);
    set_child("c_fc", std::make_shared<Linear>(h, inner, true, o));
    set_child("c_proj", std::make_shared<Linear>(inner, h, true, o));
    set_child("act", Activation::from_hf_name(c.str("activation_function", "gelu_new")));
    set_child("dropout", std::make_shared<Dropout>(c.number("resid_dropout", 0.0)));
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "GPTNeoMLP", "hidden_states");
    return call("dropout", call("c_proj", call("act", call("c_fc", x))));
  }
};

class GPTNeoBlock : public ModuleBase<GPTNeoBlock> {
 public:
  GPTNeoBlock(const ModelConfig& c, const at::TensorOptions& o, const std::string& kind) : ModuleBase("GPTNeoBlock") {
    int64_t h = c.integer("hidden_size");
    double eps = c.number("layer_norm_epsilon", 1e-5);
    set_child("ln_1", std::make_shared<LayerNorm>(h, eps, o));
    set_child("attn", std::make_shared<GPTNeoAttention>(c, o, kind));
    set_child("ln_2", std::make_shared<LayerNorm>(h, eps, o));
    set_child("mlp", std::make_shared<GPTNeoMLP>(c, o));
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "GPTNeoBlock", "hidden_states");
    Value mask = args.size() > 1 ? args[1] : Value();
    x = x + call("attn", Values{call("ln_1", x), mask}).toTensor();
    return x + call("mlp", call("ln_2", x));
  }
};

class GPTNeoModel : public ModuleBase<GPTNeoModel> {
 public:
  GPTNeoModel(const ModelConfig& c, const at::TensorOptions& o)
      : ModuleBase("GPTNeoModel"), layer_types(gpt_neo_attention_layers(c)), window(c.integer("window_size")) {
    int64_t h = c.integer("hidden_size");
    set_child("wte", std::make_shared<Embedding>(c.integer("vocab_size"), h, c10::nullopt, o));
    set_child("wpe", std::make_shared<Embedding>(c.integer("max_position_embeddings"), h, c10::nullopt, o));
    set_child("drop", std::make_shared<Dropout>(c.number("embed_dropout", 0.0)));
    std::vector<std::shared_ptr<Module>> blocks;
    for (auto& kind : layer_types) blocks.push_back(std::make_shared<GPTNeoBlock>(c, o, kind));
    set_child("h", std::make_shared<ModuleList>(blocks));
    set_child("ln_f", std::make_shared<LayerNorm>(h, c.number("layer_norm_epsilon", 1e-5), o));
  }
  std::vector<std::string> layer_types;
  int64_t window;

 protected:
  // (input_ids, {attention_mask=})
  Value forward(Values args) override {
    auto ids = tensor_arg(args, 0, "GPTNeoModel", "input_ids");
    check_sequence_fits(ids, child("wpe")->param("weight").size(0), "GPTNeoModel", "max_position_embeddings");
    const int64_t s = ids.size(1);
    auto positions = torch::arange(s, ids.options()).unsqueeze(0);
    auto x = call("drop", call("wte", ids) + call("wpe", positions));
    auto padding = kwarg_tensor(kwargs_arg(args, 1), "attention_mask");
    // transformers masks causally (and by the window) first, then adds the causal padding mask:
    // where both mask a key the two lowest values sum to -inf, so a query that sees only padding
    // averages over the keys masked once, as theirs does. Without padding: causal (or windowed) alone.
    auto with_padding = [&](at::Tensor first) -> at::Tensor {
      return padding ? first + *additive_mask(padding, s, s, /*causal=*/true, x.options()) : first;
    };
    c10::optional<at::Tensor> global, local;
    if (padding) global = with_padding(*additive_mask(c10::nullopt, s, s, /*causal=*/true, x.options()));
    if (std::count(layer_types.begin(), layer_types.end(), "local"))
      local = with_padding(with_sliding_window(c10::nullopt, s, s, window, x.options()));
    Value h = x;
    size_t i = 0;
    for (auto& [name, block] : child("h")->children_in_order()) {
      auto& mask = layer_types[i++] == "local" ? local : global;
      h = (*block)(Values{h, mask ? Value(*mask) : Value()});
    }
    return call("ln_f", h.toTensor());
  }
};

class GPTNeoForCausalLM : public CausalLM<GPTNeoForCausalLM> {
 public:
  GPTNeoForCausalLM(const ModelConfig& c, const at::TensorOptions& o)
      : CausalLM("GPTNeoForCausalLM", c, "transformer", "lm_head") {
    auto transformer = std::make_shared<GPTNeoModel>(c, o);
    set_child("transformer", transformer);
    auto head = std::make_shared<Linear>(c.integer("hidden_size"), c.integer("vocab_size"), false, o);
    if (c.flag("tie_word_embeddings", true)) head->set_param("weight", transformer->child("wte")->param("weight"));
    set_child("lm_head", head);
  }
};

}  // namespace

std::shared_ptr<Module> build_gpt_neo(const ModelConfig& config, const BuildOptions& options) {
  auto c = config.with_defaults("gpt_neo");
  check_config(c);
  auto model = std::make_shared<GPTNeoForCausalLM>(c, options.tensor_options);
  if (options.init_weights && options.tensor_options.device() != at::kMeta)
    init_weights_hf(*model, c.number("initializer_range", 0.02));
  return model;
}

}  // namespace slapo
