// BertLMHeadModel, BertForMaskedLM and RobertaForMaskedLM with Hugging Face's module names, shapes
// and tying. RoBERTa is BERT's encoder with positions counted after padding_idx and its own head.
#include "core/error.h"
#include "models/causal_lm.h"
#include "models/layers.h"
#include "models/transformer_ops.h"
#include "models/config_check.h"
#include "models/encoder_parts.h"
#include "models/zoo.h"

namespace slapo {

std::shared_ptr<Linear> tied_decoder(Module& head, const ModelConfig& c, const at::TensorOptions& o,
                                     const at::Tensor& word_embeddings, int64_t width) {
  int64_t vocab = c.integer("vocab_size");
  head.set_param("bias", torch::empty({vocab}, o).requires_grad_(true));
  auto decoder = std::make_shared<Linear>(width, vocab, false, o);
  if (c.flag("tie_word_embeddings", true)) decoder->set_param("weight", word_embeddings);
  decoder->set_param("bias", head.param("bias"));
  return decoder;
}

namespace {

// The prefix transformers gives the family's classes: "Bert", "Roberta" or "Albert".
std::string family(const ModelConfig& c) {
  if (c.model_type() == "roberta") return "Roberta";
  return c.model_type() == "albert" ? "Albert" : "Bert";
}

class BertEmbeddings : public ModuleBase<BertEmbeddings> {
 public:
  // `h`: the embeddings' width (ALBERT's embedding_size, else hidden_size)
  BertEmbeddings(const ModelConfig& c, const at::TensorOptions& o, int64_t h) : ModuleBase(family(c) + "Embeddings") {
    c10::optional<int64_t> pad;  // c10's, not std's, on LibTorch 1.x
    if (auto id = c.pad_token_id()) pad = *id;
    set_child("word_embeddings", std::make_shared<Embedding>(c.integer("vocab_size"), h, pad, o));
    // RoBERTa's position embedding has a padding row too: padding sits at position padding_idx
    if (c.model_type() == "roberta") positions_after = pad ? *pad : 0;
    set_child("position_embeddings", std::make_shared<Embedding>(c.integer("max_position_embeddings"), h,
                                                                 positions_after ? pad : c10::nullopt, o));
    set_child("token_type_embeddings", std::make_shared<Embedding>(c.integer("type_vocab_size"), h, c10::nullopt, o));
    set_child("LayerNorm", std::make_shared<LayerNorm>(h, c.number("layer_norm_eps", 1e-12), o));
    set_child("dropout", std::make_shared<Dropout>(c.number("hidden_dropout_prob", 0.1)));
  }
  /// RoBERTa: a kept token's position is padding_idx + how many kept tokens lead up to it
  /// (transformers' create_position_ids_from_input_ids), padding's is padding_idx. BERT: none.
  c10::optional<int64_t> positions_after;

 protected:
  // (input_ids, token_type_ids or nil)
  Value forward(Values args) override {
    auto ids = tensor_arg(args, 0, type_name().c_str(), "input_ids");
    int64_t rows = child("position_embeddings")->param("weight").size(0);
    at::Tensor positions;
    if (positions_after) {
      if (ids.dim() == 2 && ids.size(1) + *positions_after >= rows)
        throw Error(fmt::format("{}: a sequence of {} tokens needs positions up to {} (they start after padding_idx "
                                "{}), but max_position_embeddings is {}; at most {} tokens", type_name(), ids.size(1),
                                ids.size(1) + *positions_after, *positions_after, rows, rows - 1 - *positions_after));
      auto kept = ids.ne(*positions_after).to(at::kLong);
      positions = kept.cumsum(1) * kept + *positions_after;
    } else {
      check_sequence_fits(ids, rows, type_name().c_str(), "max_position_embeddings");
      positions = torch::arange(ids.size(1), ids.options()).unsqueeze(0);
    }
    at::Tensor types = args.size() > 1 && args[1].isTensor() ? args[1].toTensor() : torch::zeros_like(ids);
    auto e = call("word_embeddings", ids) + call("token_type_embeddings", types) +
             call("position_embeddings", positions);
    return call("dropout", call("LayerNorm", e));
  }
};

class BertSelfAttention : public ModuleBase<BertSelfAttention> {
 public:
  BertSelfAttention(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase(family(c) + "SelfAttention") {
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
    auto x = tensor_arg(args, 0, type_name().c_str(), "hidden_states");
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
  BertAttention(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase(family(c) + "Attention") {
    set_child("self", std::make_shared<BertSelfAttention>(c, o));
    set_child("output", std::make_shared<BertResidualOutput>(family(c) + "SelfOutput", c.integer("hidden_size"), c, o));
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, type_name().c_str(), "hidden_states");
    Value mask = args.size() > 1 ? args[1] : Value();
    auto attended = call("self", Values{x, mask});
    return call("output", Values{attended, x});
  }
};

class BertIntermediate : public ModuleBase<BertIntermediate> {
 public:
  BertIntermediate(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase(family(c) + "Intermediate") {
    set_child("dense", std::make_shared<Linear>(c.integer("hidden_size"), c.integer("intermediate_size"), true, o));
    set_child("intermediate_act_fn", Activation::from_hf_name(c.str("hidden_act", "gelu")));
  }

 protected:
  Value forward(Values args) override {
    return call("intermediate_act_fn", call("dense", tensor_arg(args, 0, type_name().c_str(), "hidden_states")));
  }
};

class BertLayer : public ModuleBase<BertLayer> {
 public:
  BertLayer(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase(family(c) + "Layer") {
    set_child("attention", std::make_shared<BertAttention>(c, o));
    set_child("intermediate", std::make_shared<BertIntermediate>(c, o));
    set_child("output", std::make_shared<BertResidualOutput>(family(c) + "Output", c.integer("intermediate_size"), c, o));
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, type_name().c_str(), "hidden_states");
    Value mask = args.size() > 1 ? args[1] : Value();
    auto attended = call("attention", Values{x, mask}).toTensor();
    return call("output", Values{call("intermediate", attended), attended});
  }
};

class BertEncoder : public ModuleBase<BertEncoder> {
 public:
  BertEncoder(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase(family(c) + "Encoder") {
    std::vector<std::shared_ptr<Module>> layers;
    for (int64_t i = 0; i < c.integer("num_hidden_layers"); ++i) layers.push_back(std::make_shared<BertLayer>(c, o));
    set_child("layer", std::make_shared<ModuleList>(layers));
  }

 protected:
  Value forward(Values args) override {
    Value h = tensor_arg(args, 0, type_name().c_str(), "hidden_states");
    Value mask = args.size() > 1 ? args[1] : Value();
    for (auto& [name, layer] : child("layer")->children_in_order()) h = (*layer)(Values{h, mask});
    return h;
  }
};

class BertModel : public ModuleBase<BertModel> {
 public:
  BertModel(const ModelConfig& c, const at::TensorOptions& o)
      : ModuleBase(family(c) + "Model"), causal(c.flag("is_decoder", false)) {
    set_child("embeddings", std::make_shared<BertEmbeddings>(c, o, c.integer("hidden_size")));
    set_child("encoder", std::make_shared<BertEncoder>(c, o));
  }
  bool causal;

 protected:
  // (input_ids, {attention_mask=, token_type_ids=})
  Value forward(Values args) override {
    auto ids = tensor_arg(args, 0, type_name().c_str(), "input_ids");
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
    auto decoder = tied_decoder(*this, c, o, word_embeddings, c.integer("hidden_size"));
    set_child("transform", std::make_shared<BertPredictionHeadTransform>(c, o));
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

// RobertaLMHead: dense -> GELU -> layer_norm -> decoder; decoder.weight is the word embedding matrix
// and decoder.bias is this module's `bias`.
class RobertaLMHead : public ModuleBase<RobertaLMHead> {
 public:
  RobertaLMHead(const ModelConfig& c, const at::TensorOptions& o, const at::Tensor& word_embeddings)
      : ModuleBase("RobertaLMHead") {
    int64_t h = c.integer("hidden_size");
    auto decoder = tied_decoder(*this, c, o, word_embeddings, h);
    set_child("dense", std::make_shared<Linear>(h, h, true, o));
    set_child("layer_norm", std::make_shared<LayerNorm>(h, c.number("layer_norm_eps", 1e-12), o));
    set_child("decoder", decoder);
  }

 protected:
  Value forward(Values args) override {
    auto x = call("dense", tensor_arg(args, 0, "RobertaLMHead", "features"));
    return call("decoder", call("layer_norm", at::gelu(x)));  // exact GELU whatever hidden_act says
  }
};

const std::vector<std::string> kEncoderKeywords = {"labels", "attention_mask", "token_type_ids"};

// The encoder under `base` ("bert" / "roberta") and the head under `head`, the head's decoder
// tied to the word embeddings.
template <class Root, class Head>
void build_encoder_lm(Root& root, const ModelConfig& c, const at::TensorOptions& o, const char* base,
                      const char* head) {
  auto encoder = std::make_shared<BertModel>(c, o);
  auto word = encoder->child("embeddings")->child("word_embeddings")->param("weight");
  root.set_child(base, encoder);
  root.set_child(head, std::make_shared<Head>(c, o, word));
}

class BertLMHeadModel : public CausalLM<BertLMHeadModel> {
 public:
  BertLMHeadModel(const ModelConfig& c, const at::TensorOptions& o) : CausalLM("BertLMHeadModel", c, "bert", "cls") {
    build_encoder_lm<BertLMHeadModel, BertOnlyMLMHead>(*this, c, o, "bert", "cls");
  }

 protected:
  std::vector<std::string> keywords() const override { return kEncoderKeywords; }
};

class BertForMaskedLM : public MaskedLM<BertForMaskedLM> {
 public:
  BertForMaskedLM(const ModelConfig& c, const at::TensorOptions& o) : MaskedLM("BertForMaskedLM", c, "bert", "cls") {
    build_encoder_lm<BertForMaskedLM, BertOnlyMLMHead>(*this, c, o, "bert", "cls");
  }

 protected:
  std::vector<std::string> keywords() const override { return kEncoderKeywords; }
};

class RobertaForMaskedLM : public MaskedLM<RobertaForMaskedLM> {
 public:
  RobertaForMaskedLM(const ModelConfig& c, const at::TensorOptions& o)
      : MaskedLM("RobertaForMaskedLM", c, "roberta", "lm_head") {
    build_encoder_lm<RobertaForMaskedLM, RobertaLMHead>(*this, c, o, "roberta", "lm_head");
  }

 protected:
  std::vector<std::string> keywords() const override { return kEncoderKeywords; }
};

// The root class config.architectures names: BERT's masked or causal LM head.
bool masked_lm(const ModelConfig& c) {
  const auto& f = c.json();
  if (!f.contains("architectures") || !f["architectures"].is_array() || f["architectures"].empty()) return false;
  return f["architectures"][0] == "BertForMaskedLM";
}

}  // namespace

std::shared_ptr<Module> make_bert_embeddings(const ModelConfig& c, const at::TensorOptions& o, int64_t width) {
  return std::make_shared<BertEmbeddings>(c, o, width);
}

std::shared_ptr<Module> build_bert(const ModelConfig& config, const BuildOptions& options) {
  const bool roberta = config.model_type() == "roberta";
  auto c = config.with_defaults(roberta ? "roberta" : "bert");
  check_config(c);
  std::shared_ptr<Module> model;
  if (roberta) model = std::make_shared<RobertaForMaskedLM>(c, options.tensor_options);
  else if (masked_lm(c)) model = std::make_shared<BertForMaskedLM>(c, options.tensor_options);
  else model = std::make_shared<BertLMHeadModel>(c, options.tensor_options);
  if (options.init_weights && options.tensor_options.device() != at::kMeta)
    init_weights_hf(*model, c.number("initializer_range", 0.02));
  return model;
}

}  // namespace slapo
