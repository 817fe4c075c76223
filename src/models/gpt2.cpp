// GPT2LMHeadModel with Hugging Face's module names, Conv1D layout and tied LM head.
#include <cmath>
#include <functional>

#include "core/error.h"
#include "models/causal_lm.h"
#include "models/layers.h"
#include "models/transformer_ops.h"
#include "models/config_check.h"
#include "models/sequence_split.h"
#include "models/zoo.h"

namespace slapo {
namespace {

class GPT2Attention : public ModuleBase<GPT2Attention> {
 public:
  GPT2Attention(const ModelConfig& c, const at::TensorOptions& o, int64_t layer_idx) : ModuleBase("GPT2Attention") {
    int64_t h = c.integer("n_embd");
    head_dim = head_dim_of(c, "n_embd", "n_head");
    set_child("c_attn", std::make_shared<Conv1D>(h, 3 * h, o));
    set_child("c_proj", std::make_shared<Conv1D>(h, h, o));
    set_child("attn_dropout", std::make_shared<Dropout>(c.number("attn_pdrop", 0.1)));
    set_child("resid_dropout", std::make_shared<Dropout>(c.number("resid_pdrop", 0.1)));
    impl = attention_impl_from_config(c.str("attn_implementation", "auto"));
    // transformers' GPT2Attention: scores / sqrt(head_dim) when scale_attn_weights, and / (layer
    // index + 1) when scale_attn_by_inverse_layer_idx
    if (!c.flag("scale_attn_weights", true) || c.flag("scale_attn_by_inverse_layer_idx", false)) {
      double s = c.flag("scale_attn_weights", true) ? 1.0 / std::sqrt(static_cast<double>(head_dim)) : 1.0;
      if (c.flag("scale_attn_by_inverse_layer_idx", false)) s /= static_cast<double>(layer_idx + 1);
      scale = s;
    }
  }
  std::string describe() const override {
    return scale ? fmt::format("head_dim={}, scale={:g}", head_dim, *scale) : fmt::format("head_dim={}", head_dim);
  }
  int64_t head_dim;
  AttentionImpl impl;
  c10::optional<double> scale;  // none: 1 / sqrt(head_dim)
  std::shared_ptr<const SequenceSplit> split;  // context_parallel: this rank's queries over every rank's keys

 protected:
  // (hidden_states, additive mask or nil: causal then); q, k, v are thirds of c_attn's output,
  // whatever its width.
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "GPT2Attention", "hidden_states");
    c10::optional<at::Tensor> mask;
    if (args.size() > 1 && args[1].isTensor()) mask = args[1].toTensor();
    auto qkv = call("c_attn", x).chunk(3, -1);
    auto q = split_heads(qkv[0], head_dim), k = split_heads(qkv[1], head_dim), v = split_heads(qkv[2], head_dim);
    if (split) {
      auto context = split->attend(q, k, v, scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim))));
      return call("resid_dropout", call("c_proj", merge_heads(context)));
    }
    auto context = attention_context(q, k, v, mask, /*causal=*/true, impl, plain_dropout_rate(*child("attn_dropout")),
                                     [&](const at::Tensor& probs) { return call("attn_dropout", probs); }, scale);
    return call("resid_dropout", call("c_proj", merge_heads(context)));
  }
};

class GPT2MLP : public ModuleBase<GPT2MLP> {
 public:
  GPT2MLP(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("GPT2MLP") {
    int64_t h = c.integer("n_embd"), inner = c.integer("n_inner", 4 * h);
    set_child("c_fc", std::make_shared<Conv1D>(h, inner, o));
    set_child("c_proj", std::make_shared<Conv1D>(inner, h, o));
    set_child("act", Activation::from_hf_name(c.str("activation_function", "gelu_new")));
    set_child("dropout", std::make_shared<Dropout>(c.number("resid_pdrop", 0.1)));
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "GPT2MLP", "hidden_states");
    return call("dropout", call("c_proj", call("act", call("c_fc", x))));
  }
};

class GPT2Block : public ModuleBase<GPT2Block> {
 public:
  GPT2Block(const ModelConfig& c, const at::TensorOptions& o, int64_t layer_idx) : ModuleBase("GPT2Block") {
    int64_t h = c.integer("n_embd");
    double eps = c.number("layer_norm_epsilon", 1e-5);
    set_child("ln_1", std::make_shared<LayerNorm>(h, eps, o));
    set_child("attn", std::make_shared<GPT2Attention>(c, o, layer_idx));
    set_child("ln_2", std::make_shared<LayerNorm>(h, eps, o));
    set_child("mlp", std::make_shared<GPT2MLP>(c, o));
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "GPT2Block", "hidden_states");
    Value mask = args.size() > 1 ? args[1] : Value();
    x = x + call("attn", Values{call("ln_1", x), mask}).toTensor();
    return x + call("mlp", call("ln_2", x));
  }
};

class GPT2Model : public ModuleBase<GPT2Model> {
 public:
  GPT2Model(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("GPT2Model") {
    int64_t h = c.integer("n_embd");
    set_child("wte", std::make_shared<Embedding>(c.integer("vocab_size"), h, c10::nullopt, o));
    set_child("wpe", std::make_shared<Embedding>(c.integer("n_positions"), h, c10::nullopt, o));
    set_child("drop", std::make_shared<Dropout>(c.number("embd_pdrop", 0.1)));
    std::vector<std::shared_ptr<Module>> blocks;
    for (int64_t i = 0; i < c.integer("n_layer"); ++i) blocks.push_back(std::make_shared<GPT2Block>(c, o, i));
    set_child("h", std::make_shared<ModuleList>(blocks));
    set_child("ln_f", std::make_shared<LayerNorm>(h, c.number("layer_norm_epsilon", 1e-5), o));
  }
  /// context_parallel: the input ids are this rank's tokens, at their global positions
  std::shared_ptr<const SequenceSplit> split;

 protected:
  // (input_ids, {attention_mask=})
  Value forward(Values args) override {
    auto ids = tensor_arg(args, 0, "GPT2Model", "input_ids");
    check_sequence_fits(ids, child("wpe")->param("weight").size(0), "GPT2Model", "n_positions",
                        split ? split->ranks() : 1);
    auto positions = split ? split->local_indices(ids.size(1) * split->ranks(), ids.device(), "GPT2Model").unsqueeze(0)
                           : torch::arange(ids.size(1), ids.options()).unsqueeze(0);
    auto x = call("drop", call("wte", ids) + call("wpe", positions));
    // A mask only with padding: without one the attention is causal by itself (and on LibTorch 2.x
    // may take SDPA's causal kernels, which refuse a mask).
    auto padding = kwarg_tensor(kwargs_arg(args, 1), "attention_mask");
    auto mask = padding ? additive_mask(padding, ids.size(1), ids.size(1), /*causal=*/true, x.options()) : c10::nullopt;
    Value h = x;
    for (auto& [name, block] : child("h")->children_in_order())
      h = (*block)(Values{h, mask ? Value(*mask) : Value()});
    return call("ln_f", h.toTensor());
  }
};

class GPT2LMHeadModel : public CausalLM<GPT2LMHeadModel>, public SplitsSequences {
 public:
  GPT2LMHeadModel(const ModelConfig& c, const at::TensorOptions& o)
      : CausalLM("GPT2LMHeadModel", c, "transformer", "lm_head") {
    auto transformer = std::make_shared<GPT2Model>(c, o);
    set_child("transformer", transformer);
    auto head = std::make_shared<Linear>(c.integer("n_embd"), c.integer("vocab_size"), false, o);
    if (c.flag("tie_word_embeddings", true))
      head->set_param("weight", transformer->child("wte")->param("weight"));
    set_child("lm_head", head);
  }
  std::shared_ptr<const SequenceSplit> sequence_split() const override { return split_; }
  // every attention through the split, at the tokens' global positions; refused with attention dropout
  void split_sequences(const std::shared_ptr<const SequenceSplit>& split, const std::string& where) override {
    auto* base = dynamic_cast<GPT2Model*>(child("transformer").get());
    std::vector<GPT2Attention*> attentions;
    for (auto& [name, block] : base->child("h")->children_in_order()) {
      auto* attention = dynamic_cast<GPT2Attention*>(block->child("attn").get());
      if (!attention)
        throw Error(fmt::format("context_parallel: {}.transformer.h.{}.attn is a {}, not the GPT2Attention ring "
                                "attention runs in; apply context_parallel before replacing attention",
                                where, name, block->child("attn")->type_name()));
      auto rate = plain_dropout_rate(*attention->child("attn_dropout"));
      if (!rate || *rate > 0)
        throw Error(fmt::format("context_parallel: {}.transformer.h.{}.attn drops attention probabilities "
                                "(attn_pdrop {}), which ring attention does not; build with attn_pdrop = 0",
                                where, name, rate ? fmt::format("{:g}", *rate) : std::string("replaced")));
      attentions.push_back(attention);
    }
    split->check_heads(config.integer("n_head"), where);
    split_ = split;
    base->split = split;
    for (auto* attention : attentions) attention->split = split;
  }
};

}  // namespace

void init_weights_gpt2(Module& root, const ModelConfig& c, const InitHooks& hooks) {
  const double std = c.number("initializer_range", 0.02);
  init_weights_hf(root, std, hooks);
  // GPT-2 scales the residual projections by 1/sqrt(2 * n_layer) (HF _init_weights): a second
  // pass in module order, as transformers draws them after the first
  torch::NoGradGuard no_grad;
  const double scaled = std / std::sqrt(2.0 * c.integer("n_layer"));
  std::function<void(Module&, const std::string&)> visit = [&](Module& m, const std::string& name) {
    if (name == "c_proj" && m.has_param("weight")) {
      if (hooks.again) hooks.again(m, "weight");
      if (hooks.before) hooks.before(m);
      m.param("weight").normal_(0.0, scaled);
      if (hooks.after) hooks.after(m);
    }
    for (auto& [child_name, child] : m.children_in_order()) visit(*child, child_name);
  };
  visit(root, "");
}

std::shared_ptr<Module> build_gpt2(const ModelConfig& config, const BuildOptions& options) {
  auto c = config.with_defaults("gpt2");
  check_config(c);
  auto model = std::make_shared<GPT2LMHeadModel>(c, options.tensor_options);
  if (options.init_weights && options.tensor_options.device() != at::kMeta) init_weights_gpt2(*model, c);
  return model;
}

}  // namespace slapo
