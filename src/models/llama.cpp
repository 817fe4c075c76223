// LlamaForCausalLM: RMSNorm, rotary embeddings, SwiGLU and grouped-query attention, HF names;
// Qwen2, Mistral, and Mixtral (Mistral's attention, a sparse mixture of experts for the MLP).
#include "core/error.h"
#include "models/causal_lm.h"
#include "models/config_check.h"
#include "models/layers.h"
#include "models/moe.h"
#include "models/rope.h"
#include "models/sequence_split.h"
#include "models/transformer_ops.h"
#include "models/zoo.h"

namespace slapo {
namespace {

// The HF class family a LLaMA-shaped config builds, the prefix of every module type name as
// transformers names its classes: "Llama", "Qwen2" (q/k/v biases), "Mistral" (sliding window) or
// "Mixtral" (Mistral's attention, experts for the MLP).
std::string family(const ModelConfig& c) {
  if (c.model_type() == "qwen2") return "Qwen2";
  if (c.model_type() == "mistral") return "Mistral";
  if (c.model_type() == "mixtral") return "Mixtral";
  return "Llama";
}

bool mixture_of_experts(const ModelConfig& c) { return c.model_type() == "mixtral"; }

int64_t llama_head_dim(const ModelConfig& c) {
  return c.has("head_dim") ? c.integer("head_dim") : head_dim_of(c, "hidden_size", "num_attention_heads");
}

// The sliding window layer `index` attends within, as transformers applies it: Mistral's
// sliding_window on every layer; Qwen2's on the layers layer_types marks "sliding_attention" (by
// default those from max_window_layers on, when use_sliding_window is set).
c10::optional<int64_t> layer_window(const ModelConfig& c, int64_t index) {
  if (c.model_type() == "mistral" || c.model_type() == "mixtral")
    return c.has("sliding_window") ? c10::make_optional(c.integer("sliding_window")) : c10::nullopt;
  if (c.model_type() != "qwen2") return c10::nullopt;
  bool sliding = c.has("layer_types")
                     ? c.json()["layer_types"][index].get<std::string>() == "sliding_attention"
                     : c.flag("use_sliding_window", false) && index >= c.integer("max_window_layers", 28);
  if (!sliding) return c10::nullopt;
  if (!c.flag("use_sliding_window", false) || !c.has("sliding_window"))
    throw Error(fmt::format("qwen2: layer {} is a sliding_attention layer but use_sliding_window is {} and "
                            "sliding_window {}; set both, or mark the layer \"full_attention\"",
                            index, c.flag("use_sliding_window", false), c.has("sliding_window") ? c.json()["sliding_window"].dump() : "null"));
  return c.integer("sliding_window");
}

at::Tensor rotate_half(const at::Tensor& x) {
  auto halves = x.chunk(2, -1);
  return at::cat({-halves[1], halves[0]}, -1);
}

// [batch, kv_heads, seq, dim] -> [batch, kv_heads * groups, seq, dim], each head `groups` times in a
// row (HF's repeat_kv). Written as expand and a copy, not repeat_interleave, whose size depends on a
// tensor's values: it has no meta kernel, and the planner traces layers on the meta device.
at::Tensor repeat_kv(const at::Tensor& x, int64_t groups) {
  auto s = x.sizes();
  return x.unsqueeze(2)
      .expand({s[0], s[1], groups, s[2], s[3]})
      .clone(at::MemoryFormat::Contiguous)
      .view({s[0], s[1] * groups, s[2], s[3]});
}

class LlamaRotaryEmbedding : public ModuleBase<LlamaRotaryEmbedding> {
 public:
  LlamaRotaryEmbedding(const std::string& family, int64_t head_dim_, RopeScaling rope_)
      : ModuleBase(family + "RotaryEmbedding"), head_dim(head_dim_), rope(std::move(rope_)) {}
  std::string describe() const override { return fmt::format("head_dim={}, {}", head_dim, rope.describe()); }
  int64_t head_dim;
  RopeScaling rope;

 protected:
  // (x, position_ids [B, S]) -> (cos, sin), each [B, S, head_dim] in x's dtype
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "LlamaRotaryEmbedding", "x");
    auto positions = tensor_arg(args, 1, "LlamaRotaryEmbedding", "position_ids");
    auto inv_freq = rope_inv_freq(rope, head_dim, positions.size(-1), x.options());
    auto freqs = positions.to(at::kFloat).unsqueeze(-1) * inv_freq;
    auto emb = at::cat({freqs, freqs}, -1);
    return c10::ivalue::Tuple::create({emb.cos().to(x.scalar_type()), emb.sin().to(x.scalar_type())});
  }
};

class LlamaAttention : public ModuleBase<LlamaAttention> {
 public:
  LlamaAttention(const ModelConfig& c, const at::TensorOptions& o, int64_t layer_idx)
      : ModuleBase(family(c) + "Attention") {
    int64_t h = c.integer("hidden_size"), heads = c.integer("num_attention_heads");
    int64_t kv_heads = c.integer("num_key_value_heads", heads);
    if (heads % kv_heads != 0)
      throw Error(fmt::format("{}: num_attention_heads {} is not a multiple of num_key_value_heads {}", c.model_type(), heads,
                              kv_heads));
    head_dim = llama_head_dim(c);
    // LLaMA: attention_bias on all four projections; Qwen2: biases on q, k and v only; Mistral: none
    bool qwen2 = family(c) == "Qwen2";
    bool bias = family(c) == "Llama" && c.flag("attention_bias", false);
    set_child("q_proj", std::make_shared<Linear>(h, heads * head_dim, bias || qwen2, o));
    set_child("k_proj", std::make_shared<Linear>(h, kv_heads * head_dim, bias || qwen2, o));
    set_child("v_proj", std::make_shared<Linear>(h, kv_heads * head_dim, bias || qwen2, o));
    set_child("o_proj", std::make_shared<Linear>(heads * head_dim, h, bias, o));
    impl = attention_impl_from_config(c.str("attn_implementation", "auto"));
    dropout = c.number("attention_dropout", 0.0);
    sliding_window = layer_window(c, layer_idx);
  }
  std::string describe() const override {
    std::string out = fmt::format("head_dim={}", head_dim);
    if (dropout > 0) out += fmt::format(", attention_dropout={:g}", dropout);
    if (sliding_window) out += fmt::format(", sliding_window={}", *sliding_window);
    return out;
  }
  int64_t head_dim;
  AttentionImpl impl;
  double dropout;                         // transformers' attention_dropout, applied while training
  c10::optional<int64_t> sliding_window;  // keys within this many positions back, the query's own included
  std::shared_ptr<const SequenceSplit> split;  // context_parallel: this rank's queries over every rank's keys

 protected:
  // (hidden_states, cos, sin, additive mask or nil: causal then; under context_parallel, each
  // token's document [B, S] or nil); head counts follow the projections' rows.
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "LlamaAttention", "hidden_states");
    auto cos = tensor_arg(args, 1, "LlamaAttention", "cos").unsqueeze(1);
    auto sin = tensor_arg(args, 2, "LlamaAttention", "sin").unsqueeze(1);
    c10::optional<at::Tensor> mask;
    if (args.size() > 3 && args[3].isTensor()) mask = args[3].toTensor();
    auto q = split_heads(call("q_proj", x), head_dim);
    auto k = split_heads(call("k_proj", x), head_dim);
    auto v = split_heads(call("v_proj", x), head_dim);
    q = q * cos + rotate_half(q) * sin;
    k = k * cos + rotate_half(k) * sin;
    if (q.size(1) % k.size(1) != 0)
      throw Error(fmt::format("LlamaAttention: {} query heads cannot share {} key/value heads", q.size(1), k.size(1)));
    if (split)  // the key/value heads travel unrepeated
      return call("o_proj", merge_heads(split->attend(q, k, v, 1.0 / std::sqrt(static_cast<double>(head_dim)),
                                                      sliding_window.value_or(0), mask.value_or(at::Tensor()))));
    int64_t groups = q.size(1) / k.size(1);
    if (groups > 1) {
      k = repeat_kv(k, groups);
      v = repeat_kv(v, groups);
    }
    if (sliding_window) mask = with_sliding_window(mask, q.size(2), k.size(2), *sliding_window, q.options());
    double p = is_training() ? dropout : 0.0;
    auto context = attention_context(q, k, v, mask, /*causal=*/true, impl, p,
                                     [&](const at::Tensor& probs) { return p > 0 ? at::dropout(probs, p, true) : probs; });
    return call("o_proj", merge_heads(context));
  }
};

class LlamaMLP : public ModuleBase<LlamaMLP> {
 public:
  LlamaMLP(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase(family(c) + "MLP") {
    int64_t h = c.integer("hidden_size"), inner = c.integer("intermediate_size");
    bool bias = family(c) == "Llama" && c.flag("mlp_bias", false);  // Qwen2, Mistral: none
    set_child("gate_proj", std::make_shared<Linear>(h, inner, bias, o));
    set_child("up_proj", std::make_shared<Linear>(h, inner, bias, o));
    set_child("down_proj", std::make_shared<Linear>(inner, h, bias, o));
    set_child("act_fn", Activation::from_hf_name(c.str("hidden_act", "silu")));
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "LlamaMLP", "hidden_states");
    return call("down_proj", call("act_fn", call("gate_proj", x)) * call("up_proj", x));
  }
};

class LlamaDecoderLayer : public ModuleBase<LlamaDecoderLayer> {
 public:
  LlamaDecoderLayer(const ModelConfig& c, const at::TensorOptions& o, int64_t layer_idx)
      : ModuleBase(family(c) + "DecoderLayer") {
    int64_t h = c.integer("hidden_size");
    double eps = c.number("rms_norm_eps", 1e-6);
    set_child("self_attn", std::make_shared<LlamaAttention>(c, o, layer_idx));
    if (mixture_of_experts(c)) set_child("block_sparse_moe", make_sparse_moe_block(c, o));
    else set_child("mlp", std::make_shared<LlamaMLP>(c, o));
    set_child("input_layernorm", std::make_shared<RMSNorm>(h, eps, o, family(c) + "RMSNorm"));
    set_child("post_attention_layernorm", std::make_shared<RMSNorm>(h, eps, o, family(c) + "RMSNorm"));
  }

 protected:
  // (hidden_states, cos, sin, mask) -> hidden_states; with experts, (hidden_states, router_logits)
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "LlamaDecoderLayer", "hidden_states");
    Values attn_args(args.begin(), args.end());
    attn_args[0] = call("input_layernorm", x);
    x = x + call("self_attn", attn_args).toTensor();
    if (!has_child("block_sparse_moe")) return x + call("mlp", call("post_attention_layernorm", x));
    auto moe = call("block_sparse_moe", Values{call("post_attention_layernorm", x)}).toTuple();
    return c10::ivalue::Tuple::create({x + moe->elements()[0].toTensor(), moe->elements()[1]});
  }
};

class LlamaModel : public ModuleBase<LlamaModel> {
 public:
  /// Mixtral: the states and every layer's router logits are returned when the call or the config
  /// asks for them (output_router_logits), for the load-balancing loss
  bool output_router_logits = false;
  /// context_parallel: the input ids are this rank's tokens, at their global positions
  std::shared_ptr<const SequenceSplit> split;
  LlamaModel(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase(family(c) + "Model") {
    output_router_logits = mixture_of_experts(c) && c.flag("output_router_logits", false);
    int64_t h = c.integer("hidden_size");
    c10::optional<int64_t> pad;  // c10's, not std's, on LibTorch 1.x
    if (auto id = c.pad_token_id()) pad = *id;
    set_child("embed_tokens", std::make_shared<Embedding>(c.integer("vocab_size"), h, pad, o));
    std::vector<std::shared_ptr<Module>> layers;
    for (int64_t i = 0; i < c.integer("num_hidden_layers"); ++i)
      layers.push_back(std::make_shared<LlamaDecoderLayer>(c, o, i));
    set_child("layers", std::make_shared<ModuleList>(layers));
    set_child("norm", std::make_shared<RMSNorm>(h, c.number("rms_norm_eps", 1e-6), o, family(c) + "RMSNorm"));
    set_child("rotary_emb", std::make_shared<LlamaRotaryEmbedding>(family(c), llama_head_dim(c), rope_from_config(c)));
  }

 protected:
  // (input_ids, {attention_mask=, position_ids=})
  Value forward(Values args) override {
    auto ids = tensor_arg(args, 0, "LlamaModel", "input_ids");
    check_token_ids(ids, "LlamaModel");
    auto x = call("embed_tokens", ids);
    auto kwargs = kwargs_arg(args, 1);
    // position_ids: packed documents, each starting again at 0, attend only within themselves
    // (under context_parallel: the whole rows' positions, this rank's tokens' taken from them)
    auto given_positions = kwarg_tensor(kwargs, "position_ids");
    const int64_t whole = split ? ids.size(1) * split->ranks() : ids.size(1);
    if (given_positions && (given_positions->dim() != 2 || given_positions->size(0) != ids.size(0) ||
                            given_positions->size(1) != whole || given_positions->scalar_type() != at::kLong))
      throw Error(fmt::format("LlamaModel: position_ids must be int64 of {} shape [{}, {}], got {} [{}]",
                              split ? "the whole rows'" : "input_ids'", ids.size(0), whole,
                              c10::toString(given_positions->scalar_type()), fmt::join(given_positions->sizes(), ", ")));
    at::Tensor local = split ? split->local_indices(whole, ids.device(), "LlamaModel") : at::Tensor();
    auto positions = given_positions ? (split ? given_positions->to(ids.device()).index_select(1, local)
                                              : given_positions->to(ids.device()))
                     : split ? local.unsqueeze(0).expand({ids.size(0), ids.size(1)})
                             : torch::arange(ids.size(1), ids.options()).unsqueeze(0).expand({ids.size(0), ids.size(1)});
    auto rope = call("rotary_emb", Values{x, positions}).toTuple();
    // A mask only with padding or packed documents: without either the attention is causal by itself.
    auto padding = kwarg_tensor(kwargs, "attention_mask");
    if (split && padding)
      throw Error("LlamaModel: attention_mask (padding) under context_parallel is not read yet (read: position_ids, "
                  "packed documents)");
    auto mask = padding ? additive_mask(padding, ids.size(1), ids.size(1), /*causal=*/true, x.options()) : c10::nullopt;
    if (given_positions) {
      // split: each token's document by global index (a new one at each 0), for ring attention's masks
      mask = split ? c10::optional<at::Tensor>(given_positions->to(ids.device()).eq(0).cumsum(1))
                   : within_documents(mask, positions, x.options());
    }
    at::Tensor h = x;
    std::vector<Value> router_logits;  // a mixture of experts' layers return theirs beside the states
    for (auto& [name, layer] : child("layers")->children_in_order()) {
      Value out = (*layer)(Values{h, rope->elements()[0], rope->elements()[1], mask ? Value(*mask) : Value()});
      if (out.isTuple()) {
        router_logits.push_back(out.toTuple()->elements()[1]);
        out = out.toTuple()->elements()[0];
      }
      h = out.toTensor();
    }
    h = call("norm", h);
    auto asked = kwargs ? kwarg_flag(kwargs, "output_router_logits") : c10::nullopt;
    if (router_logits.empty() || !asked.value_or(output_router_logits)) return h;
    return c10::ivalue::Tuple::create({h, c10::ivalue::Tuple::create(router_logits)});
  }
};

class LlamaForCausalLM : public CausalLM<LlamaForCausalLM>, public SplitsSequences {
 public:
  LlamaForCausalLM(const ModelConfig& c, const at::TensorOptions& o)
      : CausalLM(family(c) + "ForCausalLM", c, "model", "lm_head"),
        experts(mixture_of_experts(c) ? c.integer("num_local_experts") : 0),
        top_k(mixture_of_experts(c) ? c.integer("num_experts_per_tok") : 0),
        aux_loss_coef(c.number("router_aux_loss_coef", 0.001)) {
    auto model = std::make_shared<LlamaModel>(c, o);
    set_child("model", model);
    auto head = std::make_shared<Linear>(c.integer("hidden_size"), c.integer("vocab_size"), false, o);
    if (c.flag("tie_word_embeddings", false))
      head->set_param("weight", model->child("embed_tokens")->param("weight"));
    set_child("lm_head", head);
  }

 protected:
  std::vector<std::string> keywords() const override { return {"labels", "attention_mask", "position_ids"}; }
  std::vector<std::string> flags() const override {
    return experts ? std::vector<std::string>{"output_router_logits"} : std::vector<std::string>{};
  }
  at::Tensor hidden_of(const Value& base) const override {
    return base.isTuple() ? base.toTuple()->elements()[0].toTensor() : base.toTensor();
  }
  // with the router logits: + router_aux_loss_coef x the load-balancing loss, as transformers adds it
  at::Tensor with_extra_loss(at::Tensor loss, const Value& base,
                             const c10::optional<c10::impl::GenericDict>& kw) const override {
    if (!base.isTuple()) return loss;
    return loss + aux_loss_coef * aux_loss(base, kw).to(loss.device());
  }
  // without labels, asked for output_router_logits in the call: (logits, the load-balancing loss),
  // transformers' logits and aux_loss (a pipeline's last stage adds it to the loss it computes)
  Value without_labels(const at::Tensor& logits, const Value& base,
                       const c10::optional<c10::impl::GenericDict>& kw) const override {
    auto asked = kw ? kwarg_flag(kw, "output_router_logits") : c10::nullopt;
    if (!base.isTuple() || !asked.value_or(false)) return logits;
    return c10::ivalue::Tuple::create({logits, aux_loss(base, kw).to(logits.device())});
  }
  at::Tensor aux_loss(const Value& base, const c10::optional<c10::impl::GenericDict>& kw) const {
    std::vector<at::Tensor> logits;
    for (auto& l : base.toTuple()->elements()[1].toTuple()->elements()) logits.push_back(l.toTensor());
    return load_balancing_loss(logits, experts, top_k, kwarg_tensor(kw, "attention_mask"));
  }

 private:
  int64_t experts, top_k;
  double aux_loss_coef;

 public:
  std::shared_ptr<const SequenceSplit> sequence_split() const override { return split_; }
  void split_sequences(const std::shared_ptr<const SequenceSplit>& split, const std::string& where) override;
};

void LlamaForCausalLM::split_sequences(const std::shared_ptr<const SequenceSplit>& split, const std::string& where) {
  const ModelConfig& c = config;
  if (mixture_of_experts(c))
    throw Error(fmt::format("context_parallel: {} is a mixture of experts, whose load-balancing loss would see this "
                            "rank's tokens alone; not supported yet (shard_experts and fully_shard lay it out)", where));
  if (rope_from_config(c).type == "dynamic")
    throw Error(fmt::format("context_parallel: {} uses dynamic NTK rotary scaling, whose frequencies depend on the "
                            "sequence length each rank would see; not supported yet", where));
  auto* base = dynamic_cast<LlamaModel*>(child("model").get());
  std::vector<LlamaAttention*> attentions;
  for (auto& [name, layer] : base->child("layers")->children_in_order()) {
    auto* attention = dynamic_cast<LlamaAttention*>(layer->child("self_attn").get());
    if (!attention)
      throw Error(fmt::format("context_parallel: {}.model.layers.{}.self_attn is a {}, not the {} ring attention runs "
                              "in; apply context_parallel before replacing attention",
                              where, name, layer->child("self_attn")->type_name(), family(c) + "Attention"));
    if (attention->dropout > 0)
      throw Error(fmt::format("context_parallel: {}.model.layers.{}.self_attn drops attention probabilities "
                              "(attention_dropout {}), which ring attention does not; build with attention_dropout = 0",
                              where, name, attention->dropout));
    attentions.push_back(attention);
  }
  split->check_heads(c.integer("num_attention_heads"), where);
  split_ = split;
  base->split = split;
  for (auto* attention : attentions) attention->split = split;
}

}  // namespace

std::shared_ptr<Module> build_llama(const ModelConfig& config, const BuildOptions& options) {
  const std::string type = config.model_type();
  auto c = config.with_defaults(type == "qwen2" || type == "mistral" || type == "mixtral" ? type : "llama");
  check_config(c);
  auto model = std::make_shared<LlamaForCausalLM>(c, options.tensor_options);
  if (options.init_weights && options.tensor_options.device() != at::kMeta)
    init_weights_hf(*model, c.number("initializer_range", 0.02));
  return model;
}

}  // namespace slapo
