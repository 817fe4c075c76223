// BertLMHeadModel with Hugging Face's module names, shapes and tying.
#include "core/error.h"
#include "models/causal_lm.h"
#include "models/layers.h"
#include "models/transformer_ops.h"
#include "models/config_check.h"
#include "models/zoo.h"

namespace slapo {
namespace {

class BertEmbeddings : public ModuleBase<BertEmbeddings> {
 public:
  BertEmbeddings(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("BertEmbeddings") {
    int64_t h = c.integer("hidden_size");
    c10::optional<int64_t> pad;  // c10's, not std's, on LibTorch 1.x
    if (auto id = c.pad_token_id()) pad = *id;
    set_child("word_embeddings", std::make_shared<Embedding>(c.integer("vocab_size"), h, pad, o));
    set_child("position_embeddings", std::make_shared<Embedding>(c.integer("max_position_embeddings"), h, c10::nullopt, o));
    set_child("token_type_embeddings", std::make_shared<Embedding>(c.integer("type_vocab_size"), h, c10::nullopt, o));
    set_child("LayerNorm", std::make_shared<LayerNorm>(h, c.number("layer_norm_eps", 1e-12), o));
    set_child("dropout", std::make_shared<Dropout>(c.number("hidden_dropout_prob", 0.1)));
  }

 protected:
  // (input_ids, token_type_ids or nil)
  Value forward(Values args) override {
    auto ids = tensor_arg(args, 0, "BertEmbeddings", "input_ids");
    check_sequence_fits(ids, child("position_embeddings")->param("weight").size(0), "BertEmbeddings",
                        "max_position_embeddings");
    auto positions = torch::arange(ids.size(1), ids.options()).unsqueeze(0);
    at::Tensor types = args.size() > 1 && args[1].isTensor() ? args[1].toTensor() : torch::zeros_like(ids);
    auto e = call("word_embeddings", ids) + call("token_type_embeddings", types) +
             call("position_embeddings", positions);
    return call("dropout", call("LayerNorm", e));
  }
};

class BertSelfAttention : public ModuleBase<BertSelfAttention> {
 public:
  BertSelfAttention(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("BertSelfAttention") {
    int64_t h = c.integer("hidden_size");
    head_dim = head_dim_of(c, "hidden_size", "num_attention_heads");
    for (auto name : {"query", "key", "value"}) set_child(name, std::make_shared<Linear>(h, h, true, o));
    set_child("dropout", std::make_shared<Dropout>(c.number("attention_probs_dropout_prob", 0.1)));
    impl = attention_impl_from_config(c.str("attn_implementation", "auto"));
  }
  std::string describe() const override { return fmt::format("head_dim={}", head_dim); }
  int64_t head_dim;
  AttentionImpl impl;

 protected:
  // (hidden_states, additive mask or nil); the head count follows the query rows (shard-proof).
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "BertSelfAttention", "hidden_states");
    c10::optional<at::Tensor> mask;
    if (args.size() > 1 && args[1].isTensor()) mask = args[1].toTensor();
    auto q = split_heads(call("query", x), head_dim);
    auto k = split_heads(call("key", x), head_dim);
    auto v = split_heads(call("value", x), head_dim);
    return merge_heads(attention_context(q, k, v, mask, /*causal=*/false, impl, plain_dropout_rate(*child("dropout")),
                                         [&](const at::Tensor& probs) { return call("dropout", probs); }));
  }
};

// BertSelfOutput and BertOutput: dense -> dropout -> LayerNorm(x + residual).
class BertResidualOutput : public ModuleBase<BertResidualOutput> {
 public:
  BertResidualOutput(std::string type, int64_t in, const ModelConfig& c, const at::TensorOptions& o)
      : ModuleBase(std::move(type)) {
    int64_t h = c.integer("hidden_size");
    set_child("dense", std::make_shared<Linear>(in, h, true, o));
    set_child("LayerNorm", std::make_shared<LayerNorm>(h, c.number("layer_norm_eps", 1e-12), o));
    set_child("dropout", std::make_shared<Dropout>(c.number("hidden_dropout_prob", 0.1)));
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, type_name().c_str(), "hidden_states");
    auto residual = tensor_arg(args, 1, type_name().c_str(), "input_tensor");
    return call("LayerNorm", call("dropout", call("dense", x)) + residual);
  }
};

class BertAttention : public ModuleBase<BertAttention> {
 public:
  BertAttention(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("BertAttention") {
    set_child("self", std::make_shared<BertSelfAttention>(c, o));
    set_child("output", std::make_shared<BertResidualOutput>("BertSelfOutput", c.integer("hidden_size"), c, o));
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "BertAttention", "hidden_states");
    Value mask = args.size() > 1 ? args[1] : Value();
    auto attended = call("self", Values{x, mask});
    return call("output", Values{attended, x});
  }
};

class BertIntermediate : public ModuleBase<BertIntermediate> {
 public:
  BertIntermediate(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("BertIntermediate") {
    set_child("dense", std::make_shared<Linear>(c.integer("hidden_size"), c.integer("intermediate_size"), true, o));
    set_child("intermediate_act_fn", Activation::from_hf_name(c.str("hidden_act", "gelu")));
  }

 protected:
  Value forward(Values args) override {
    return call("intermediate_act_fn", call("dense", tensor_arg(args, 0, "BertIntermediate", "hidden_states")));
  }
};

class BertLayer : public ModuleBase<BertLayer> {
 public:
  BertLayer(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("BertLayer") {
    set_child("attention", std::make_shared<BertAttention>(c, o));
    set_child("intermediate", std::make_shared<BertIntermediate>(c, o));
    set_child("output", std::make_shared<BertResidualOutput>("BertOutput", c.integer("intermediate_size"), c, o));
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "BertLayer", "hidden_states");
    Value mask = args.size() > 1 ? args[1] : Value();
    auto attended = call("attention", Values{x, mask}).toTensor();
    return call("output", Values{call("intermediate", attended), attended});
  }
};

class BertEncoder : public ModuleBase<BertEncoder> {
 public:
  BertEncoder(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("BertEncoder") {
    std::vector<std::shared_ptr<Module>> layers;
    for (int64_t i = 0; i < c.integer("num_hidden_layers"); ++i) layers.push_back(std::make_shared<BertLayer>(c, o));
    set_child("layer", std::make_shared<ModuleList>(layers));
  }

 protected:
  Value forward(Values args) override {
    Value h = tensor_arg(args, 0, "BertEncoder", "hidden_states");
    Value mask = args.size() > 1 ? args[1] : Value();
    for (auto& [name, layer] : child("layer")->children_in_order()) h = (*layer)(Values{h, mask});
    return h;
  }
};

class BertModel : public ModuleBase<BertModel> {
 public:
  BertModel(const ModelConfig& c, const at::TensorOptions& o)
      : ModuleBase("BertModel"), causal(c.flag("is_decoder", false)) {
    set_child("embeddings", std::make_shared<BertEmbeddings>(c, o));
    set_child("encoder", std::make_shared<BertEncoder>(c, o));
  }
  bool causal;

 protected:
  // (input_ids, {attention_mask=, token_type_ids=})
  Value forward(Values args) override {
    auto ids = tensor_arg(args, 0, "BertModel", "input_ids");
    auto kw = kwargs_arg(args, 1);
    auto types = kwarg_tensor(kw, "token_type_ids");
    auto h = call("embeddings", Values{ids, types ? Value(*types) : Value()}).toTensor();
    auto mask = additive_mask(kwarg_tensor(kw, "attention_mask"), ids.size(1), ids.size(1), causal, h.options());
    return call("encoder", Values{h, mask ? Value(*mask) : Value()});
  }
};

class BertPredictionHeadTransform : public ModuleBase<BertPredictionHeadTransform> {
 public:
  BertPredictionHeadTransform(const ModelConfig& c, const at::TensorOptions& o)
      : ModuleBase("BertPredictionHeadTransform") {
    int64_t h = c.integer("hidden_size");
    set_child("dense", std::make_shared<Linear>(h, h, true, o));
    set_child("transform_act_fn", Activation::from_hf_name(c.str("hidden_act", "gelu")));
    set_child("LayerNorm", std::make_shared<LayerNorm>(h, c.number("layer_norm_eps", 1e-12), o));
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "BertPredictionHeadTransform", "hidden_states");
    return call("LayerNorm", call("transform_act_fn", call("dense", x)));
  }
};

// decoder.weight is the word embedding matrix and decoder.bias is this module's `bias`.
class BertLMPredictionHead : public ModuleBase<BertLMPredictionHead> {
 public:
  BertLMPredictionHead(const ModelConfig& c, const at::TensorOptions& o, const at::Tensor& word_embeddings)
      : ModuleBase("BertLMPredictionHead") {
    int64_t h = c.integer("hidden_size"), vocab = c.integer("vocab_size");
    set_param("bias", torch::empty({vocab}, o).requires_grad_(true));
    set_child("transform", std::make_shared<BertPredictionHeadTransform>(c, o));
    auto decoder = std::make_shared<Linear>(h, vocab, false, o);
    if (c.flag("tie_word_embeddings", true)) decoder->set_param("weight", word_embeddings);
    decoder->set_param("bias", param("bias"));
    set_child("decoder", decoder);
  }

 protected:
  Value forward(Values args) override {
    return call("decoder", call("transform", tensor_arg(args, 0, "BertLMPredictionHead", "hidden_states")));
  }
};

class BertOnlyMLMHead : public ModuleBase<BertOnlyMLMHead> {
 public:
  BertOnlyMLMHead(const ModelConfig& c, const at::TensorOptions& o, const at::Tensor& word_embeddings)
      : ModuleBase("BertOnlyMLMHead") {
    set_child("predictions", std::make_shared<BertLMPredictionHead>(c, o, word_embeddings));
  }

 protected:
  Value forward(Values args) override {
    return call("predictions", tensor_arg(args, 0, "BertOnlyMLMHead", "sequence_output"));
  }
};

class BertLMHeadModel : public CausalLM<BertLMHeadModel> {
 public:
  BertLMHeadModel(const ModelConfig& c, const at::TensorOptions& o) : CausalLM("BertLMHeadModel", c, "bert", "cls") {
    auto bert = std::make_shared<BertModel>(c, o);
    auto word = bert->child("embeddings")->child("word_embeddings")->param("weight");
    set_child("bert", bert);
    set_child("cls", std::make_shared<BertOnlyMLMHead>(c, o, word));
  }

 protected:
  std::vector<std::string> keywords() const override { return {"labels", "attention_mask", "token_type_ids"}; }
};

}  // namespace

std::shared_ptr<Module> build_bert(const ModelConfig& config, const BuildOptions& options) {
  auto c = config.with_defaults("bert");
  check_config(c);
  auto model = std::make_shared<BertLMHeadModel>(c, options.tensor_options);
  if (options.init_weights && options.tensor_options.device() != at::kMeta)
    init_weights_hf(*model, c.number("initializer_range", 0.02));
  return model;
}

}  // namespace slapo
