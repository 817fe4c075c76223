// OPTForCausalLM with Hugging Face's module names: learned positions counted from the attention
// mask with an offset of 2, pre- or post-LayerNorm layers (do_layer_norm_before), and the
// project_in / project_out pair where word_embed_proj_dim differs from hidden_size (opt-350m).
#include "core/error.h"
#include "models/causal_lm.h"
#include "models/config_check.h"
#include "models/layers.h"
#include "models/transformer_ops.h"
#include "models/zoo.h"

namespace slapo {
namespace {

// transformers' OPTLearnedPositionalEmbedding keeps two rows ahead of the first position.
constexpr int64_t kPositionOffset = 2;

class OPTAttention : public ModuleBase<OPTAttention> {
 public:
  OPTAttention(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("OPTAttention") {
    int64_t h = c.integer("hidden_size");
    head_dim = head_dim_of(c, "hidden_size", "num_attention_heads");
    bool bias = c.flag("enable_bias", true);
    for (const char* name : {"k_proj", "v_proj", "q_proj", "out_proj"})
      set_child(name, std::make_shared<Linear>(h, h, bias, o));
    set_child("dropout", std::make_shared<Dropout>(c.number("attention_dropout", 0.0)));
    impl = attention_impl_from_config(c.str("attn_implementation", "auto"));
  }
  std::string describe() const override { return fmt::format("head_dim={}", head_dim); }
  int64_t head_dim;
  AttentionImpl impl;

 protected:
  // (hidden_states, additive mask or nil: causal then)
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "OPTAttention", "hidden_states");
    c10::optional<at::Tensor> mask;
    if (args.size() > 1 && args[1].isTensor()) mask = args[1].toTensor();
    auto q = split_heads(call("q_proj", x), head_dim), k = split_heads(call("k_proj", x), head_dim);
    auto v = split_heads(call("v_proj", x), head_dim);
    auto context = attention_context(q, k, v, mask, /*causal=*/true, impl, plain_dropout_rate(*child("dropout")),
                                     [&](const at::Tensor& probs) { return call("dropout", probs); });
    return call("out_proj", merge_heads(context));
  }
};

class OPTDecoderLayer : public ModuleBase<OPTDecoderLayer> {
 public:
  OPTDecoderLayer(const ModelConfig& c, const at::TensorOptions& o)
      : ModuleBase("OPTDecoderLayer"), norm_first(c.flag("do_layer_norm_before", true)) {
    int64_t h = c.integer("hidden_size"), ffn = c.integer("ffn_dim");
    bool bias = c.flag("enable_bias", true);
    set_child("self_attn", std::make_shared<OPTAttention>(c, o));
    set_child("activation_fn", Activation::from_hf_name(c.str("activation_function", "relu")));
    set_child("self_attn_layer_norm", std::make_shared<LayerNorm>(h, 1e-5, o));
    set_child("fc1", std::make_shared<Linear>(h, ffn, bias, o));
    set_child("fc2", std::make_shared<Linear>(ffn, h, bias, o));
    set_child("final_layer_norm", std::make_shared<LayerNorm>(h, 1e-5, o));
    set_child("dropout", std::make_shared<Dropout>(c.number("dropout", 0.1)));
  }
  std::string describe() const override { return norm_first ? "pre-norm" : "post-norm"; }
  bool norm_first;

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "OPTDecoderLayer", "hidden_states");
    Value mask = args.size() > 1 ? args[1] : Value();
    auto h = norm_first ? call("self_attn_layer_norm", x) : x;
    x = x + call("dropout", call("self_attn", Values{h, mask}).toTensor());
    if (!norm_first) x = call("self_attn_layer_norm", x);
    h = norm_first ? call("final_layer_norm", x) : x;
    x = x + call("dropout", call("fc2", call("activation_fn", call("fc1", h))));
    return norm_first ? x : call("final_layer_norm", x);
  }
};

class OPTDecoder : public ModuleBase<OPTDecoder> {
 public:
  OPTDecoder(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("OPTDecoder") {
    int64_t h = c.integer("hidden_size"), word = c.integer("word_embed_proj_dim", h);
    c10::optional<int64_t> pad;
    if (auto id = c.pad_token_id()) pad = *id;
    set_child("embed_tokens", std::make_shared<Embedding>(c.integer("vocab_size"), word, pad, o));
    set_child("embed_positions",
              std::make_shared<Embedding>(c.integer("max_position_embeddings") + kPositionOffset, h, c10::nullopt, o));
    if (word != h) {
      set_child("project_out", std::make_shared<Linear>(h, word, false, o));
      set_child("project_in", std::make_shared<Linear>(word, h, false, o));
    }
    if (c.flag("do_layer_norm_before", true) && !c.flag("_remove_final_layer_norm", false))
      set_child("final_layer_norm", std::make_shared<LayerNorm>(h, 1e-5, o));
    std::vector<std::shared_ptr<Module>> layers;
    for (int64_t i = 0; i < c.integer("num_hidden_layers"); ++i) layers.push_back(std::make_shared<OPTDecoderLayer>(c, o));
    set_child("layers", std::make_shared<ModuleList>(layers));
    set_child("dropout", std::make_shared<Dropout>(c.number("dropout", 0.1)));
  }

 protected:
  // (input_ids, {attention_mask=})
  Value forward(Values args) override {
    auto ids = tensor_arg(args, 0, "OPTDecoder", "input_ids");
    check_sequence_fits(ids, child("embed_positions")->param("weight").size(0) - kPositionOffset, "OPTDecoder",
                        "max_position_embeddings");
    const int64_t s = ids.size(1);
    auto padding = kwarg_tensor(kwargs_arg(args, 1), "attention_mask");
    // a token's position counts the kept tokens up to it; padding sits at position -1 (row 1)
    auto kept = padding ? padding->to(ids.device()).to(at::kLong) : torch::ones_like(ids, ids.options().dtype(at::kLong));
    auto positions = kept.cumsum(1) * kept - 1 + kPositionOffset;
    auto x = call("embed_tokens", ids);
    if (has_child("project_in")) x = call("project_in", x);
    x = call("dropout", x + call("embed_positions", positions));
    auto mask = padding ? additive_mask(padding, s, s, /*causal=*/true, x.options()) : c10::nullopt;
    Value h = x;
    for (auto& [name, layer] : child("layers")->children_in_order())
      h = (*layer)(Values{h, mask ? Value(*mask) : Value()});
    auto out = h.toTensor();
    if (has_child("final_layer_norm")) out = call("final_layer_norm", out);
    if (has_child("project_out")) out = call("project_out", out);
    return out;
  }
};

class OPTModel : public ModuleBase<OPTModel> {
 public:
  OPTModel(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("OPTModel") {
    set_child("decoder", std::make_shared<OPTDecoder>(c, o));
  }

 protected:
  Value forward(Values args) override { return call("decoder", std::move(args)); }
};

class OPTForCausalLM : public CausalLM<OPTForCausalLM> {
 public:
  OPTForCausalLM(const ModelConfig& c, const at::TensorOptions& o) : CausalLM("OPTForCausalLM", c, "model", "lm_head") {
    auto model = std::make_shared<OPTModel>(c, o);
    set_child("model", model);
    auto embed = model->child("decoder")->child("embed_tokens");
    auto head = std::make_shared<Linear>(embed->param("weight").size(1), c.integer("vocab_size"), false, o);
    if (c.flag("tie_word_embeddings", true)) head->set_param("weight", embed->param("weight"));
    set_child("lm_head", head);
  }
};

}  // namespace

std::shared_ptr<Module> build_opt(const ModelConfig& config, const BuildOptions& options) {
  auto c = config.with_defaults("opt");
  check_config(c);
  auto model = std::make_shared<OPTForCausalLM>(c, options.tensor_options);
  if (options.init_weights && options.tensor_options.device() != at::kMeta)
    init_weights_hf(*model, c.number("init_std", 0.02));  // OPT's field for initializer_range
  return model;
}

}  // namespace slapo
