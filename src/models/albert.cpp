// AlbertForMaskedLM with Hugging Face's module names: embeddings embedding_size wide, mapped up to
// hidden_size once, and num_hidden_layers applications of num_hidden_groups shared groups of
// inner_group_num layers each (the parameters are shared, the computation is not).
#include <cmath>

#include "core/error.h"
#include "models/causal_lm.h"
#include "models/config_check.h"
#include "models/encoder_parts.h"
#include "models/layers.h"
#include "models/transformer_ops.h"
#include "models/zoo.h"

namespace slapo {
namespace {

// Self-attention with its output projection, dropout and residual LayerNorm in one module.
class AlbertAttention : public ModuleBase<AlbertAttention> {
 public:
  AlbertAttention(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("AlbertAttention") {
    int64_t h = c.integer("hidden_size");
    head_dim = head_dim_of(c, "hidden_size", "num_attention_heads");
    for (auto name : {"query", "key", "value"}) set_child(name, std::make_shared<Linear>(h, h, true, o));
    set_child("attention_dropout", std::make_shared<Dropout>(c.number("attention_probs_dropout_prob", 0.0)));
    set_child("output_dropout", std::make_shared<Dropout>(c.number("hidden_dropout_prob", 0.0)));
    set_child("dense", std::make_shared<Linear>(h, h, true, o));
    set_child("LayerNorm", std::make_shared<LayerNorm>(h, c.number("layer_norm_eps", 1e-12), o));
    impl = attention_impl_from_config(c.str("attn_implementation", "auto"));
  }
  std::string describe() const override { return fmt::format("head_dim={}", head_dim); }
  int64_t head_dim;
  AttentionImpl impl;

 protected:
  // (hidden_states, additive mask or nil)
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "AlbertAttention", "hidden_states");
    c10::optional<at::Tensor> mask;
    if (args.size() > 1 && args[1].isTensor()) mask = args[1].toTensor();
    auto q = split_heads(call("query", x), head_dim), k = split_heads(call("key", x), head_dim);
    auto v = split_heads(call("value", x), head_dim);
    auto context = attention_context(q, k, v, mask, /*causal=*/false, impl,
                                     plain_dropout_rate(*child("attention_dropout")),
                                     [&](const at::Tensor& probs) { return call("attention_dropout", probs); });
    return call("LayerNorm", x + call("output_dropout", call("dense", merge_heads(context))));
  }
};

class AlbertLayer : public ModuleBase<AlbertLayer> {
 public:
  AlbertLayer(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("AlbertLayer") {
    int64_t h = c.integer("hidden_size"), inner = c.integer("intermediate_size");
    set_child("full_layer_layer_norm", std::make_shared<LayerNorm>(h, c.number("layer_norm_eps", 1e-12), o));
    set_child("attention", std::make_shared<AlbertAttention>(c, o));
    set_child("ffn", std::make_shared<Linear>(h, inner, true, o));
    set_child("ffn_output", std::make_shared<Linear>(inner, h, true, o));
    set_child("activation", Activation::from_hf_name(c.str("hidden_act", "gelu_new")));
    // transformers' AlbertLayer has a dropout it never applies; so does this one
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "AlbertLayer", "hidden_states");
    Value mask = args.size() > 1 ? args[1] : Value();
    auto attended = call("attention", Values{x, mask}).toTensor();
    return call("full_layer_layer_norm", call("ffn_output", call("activation", call("ffn", attended))) + attended);
  }
};

class AlbertLayerGroup : public ModuleBase<AlbertLayerGroup> {
 public:
  AlbertLayerGroup(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("AlbertLayerGroup") {
    std::vector<std::shared_ptr<Module>> layers;
    for (int64_t i = 0; i < c.integer("inner_group_num"); ++i) layers.push_back(std::make_shared<AlbertLayer>(c, o));
    set_child("albert_layers", std::make_shared<ModuleList>(layers));
  }

 protected:
  Value forward(Values args) override {
    Value h = tensor_arg(args, 0, "AlbertLayerGroup", "hidden_states");
    Value mask = args.size() > 1 ? args[1] : Value();
    for (auto& [name, layer] : child("albert_layers")->children_in_order()) h = (*layer)(Values{h, mask});
    return h;
  }
};

class AlbertTransformer : public ModuleBase<AlbertTransformer> {
 public:
  AlbertTransformer(const ModelConfig& c, const at::TensorOptions& o)
      : ModuleBase("AlbertTransformer"), layers(c.integer("num_hidden_layers")), groups(c.integer("num_hidden_groups")) {
    set_child("embedding_hidden_mapping_in",
              std::make_shared<Linear>(c.integer("embedding_size"), c.integer("hidden_size"), true, o));
    std::vector<std::shared_ptr<Module>> list;
    for (int64_t i = 0; i < groups; ++i) list.push_back(std::make_shared<AlbertLayerGroup>(c, o));
    set_child("albert_layer_groups", std::make_shared<ModuleList>(list));
  }
  std::string describe() const override { return fmt::format("{} layers over {} shared group(s)", layers, groups); }
  int64_t layers, groups;

 protected:
  Value forward(Values args) override {
    Value h = call("embedding_hidden_mapping_in", tensor_arg(args, 0, "AlbertTransformer", "hidden_states"));
    Value mask = args.size() > 1 ? args[1] : Value();
    auto group_list = child("albert_layer_groups")->children_in_order();
    for (int64_t i = 0; i < layers; ++i) {
      // layer i runs group int(i / (layers / groups)), transformers' float arithmetic
      auto g = static_cast<int64_t>(static_cast<double>(i) / (static_cast<double>(layers) / static_cast<double>(groups)));
      h = (*group_list.at(g).second)(Values{h, mask});
    }
    return h;
  }
};

class AlbertModel : public ModuleBase<AlbertModel> {
 public:
  AlbertModel(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("AlbertModel") {
    set_child("embeddings", make_bert_embeddings(c, o, c.integer("embedding_size")));
    set_child("encoder", std::make_shared<AlbertTransformer>(c, o));
  }

 protected:
  // (input_ids, {attention_mask=, token_type_ids=})
  Value forward(Values args) override {
    auto ids = tensor_arg(args, 0, "AlbertModel", "input_ids");
    auto kw = kwargs_arg(args, 1);
    auto types = kwarg_tensor(kw, "token_type_ids");
    auto h = call("embeddings", Values{ids, types ? Value(*types) : Value()}).toTensor();
    auto mask = additive_mask(kwarg_tensor(kw, "attention_mask"), ids.size(1), ids.size(1), false, h.options());
    return call("encoder", Values{h, mask ? Value(*mask) : Value()});
  }
};

// dense -> activation -> LayerNorm -> decoder (embedding_size -> vocabulary, tied)
class AlbertMLMHead : public ModuleBase<AlbertMLMHead> {
 public:
  AlbertMLMHead(const ModelConfig& c, const at::TensorOptions& o, const at::Tensor& word_embeddings)
      : ModuleBase("AlbertMLMHead") {
    int64_t e = c.integer("embedding_size");
    // PyTorch's default eps, not layer_norm_eps: transformers' modeling_albert.py builds this
    // LayerNorm so at the commit tests/fixtures/hf/albert-tiny was computed with (docs/models.md)
    set_child("LayerNorm", std::make_shared<LayerNorm>(e, 1e-5, o));
    auto decoder = tied_decoder(*this, c, o, word_embeddings, e);
    set_child("dense", std::make_shared<Linear>(c.integer("hidden_size"), e, true, o));
    set_child("decoder", decoder);
    set_child("activation", Activation::from_hf_name(c.str("hidden_act", "gelu_new")));
  }

 protected:
  Value forward(Values args) override {
    auto x = call("dense", tensor_arg(args, 0, "AlbertMLMHead", "hidden_states"));
    return call("decoder", call("LayerNorm", call("activation", x)));
  }
};

class AlbertForMaskedLM : public MaskedLM<AlbertForMaskedLM> {
 public:
  AlbertForMaskedLM(const ModelConfig& c, const at::TensorOptions& o)
      : MaskedLM("AlbertForMaskedLM", c, "albert", "predictions") {
    auto albert = std::make_shared<AlbertModel>(c, o);
    auto word = albert->child("embeddings")->child("word_embeddings")->param("weight");
    set_child("albert", albert);
    set_child("predictions", std::make_shared<AlbertMLMHead>(c, o, word));
  }

 protected:
  std::vector<std::string> keywords() const override { return {"labels", "attention_mask", "token_type_ids"}; }
};

}  // namespace

std::shared_ptr<Module> build_albert(const ModelConfig& config, const BuildOptions& options) {
  auto c = config.with_defaults("albert");
  check_config(c);
  auto model = std::make_shared<AlbertForMaskedLM>(c, options.tensor_options);
  if (options.init_weights && options.tensor_options.device() != at::kMeta)
    init_weights_hf(*model, c.number("initializer_range", 0.02));
  return model;
}

}  // namespace slapo
