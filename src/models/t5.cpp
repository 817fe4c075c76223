// T5ForConditionalGeneration with Hugging Face's module names: an encoder and a decoder stack
// sharing one embedding, unscaled attention with a learned relative position bias (bucketed, the
// first layer's reused by the rest), RMS norms, and ReLU or gated feed-forward layers.
#include <cmath>
#include <functional>

#include "core/error.h"
#include "models/config_check.h"
#include "models/layers.h"
#include "models/transformer_ops.h"
#include "models/zoo.h"

namespace slapo {

namespace {

// feed_forward_proj as transformers' T5Config reads it: "<act>" or "gated-<act>".
struct T5FeedForward {
  bool gated;
  std::string activation;
};

T5FeedForward t5_feed_forward(const ModelConfig& c) {
  std::string proj = c.str("feed_forward_proj", "relu");
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    size_t dash = proj.find('-', start);
    parts.push_back(proj.substr(start, dash == std::string::npos ? std::string::npos : dash - start));
    if (dash == std::string::npos) break;
    start = dash + 1;
  }
  if (parts.size() > 2 || (parts.size() == 2 && parts[0] != "gated"))
    throw Error(fmt::format("config: t5 field 'feed_forward_proj' = \"{}\" is not '<act>' or 'gated-<act>' (e.g. "
                            "\"relu\", \"gated-gelu\")", proj));
  // transformers' T5Config: "gated-gelu" means the tanh GELU (gelu_new); is_gated_act and
  // dense_act_fn, when config.json carries them, are set over what it derived, as its kwargs are
  T5FeedForward out{parts.size() == 2, proj == "gated-gelu" ? "gelu_new" : parts.back()};
  if (c.has("is_gated_act")) out.gated = c.flag("is_gated_act", out.gated);
  if (c.has("dense_act_fn")) out.activation = c.str("dense_act_fn", out.activation);
  return out;
}


// transformers' _relative_position_bucket: exact buckets for short distances, logarithmic ones up
// to max_distance; bidirectional (the encoder) spends half the buckets on keys after the query.
at::Tensor relative_position_bucket(at::Tensor relative, bool bidirectional, int64_t buckets, int64_t max_distance) {
  auto result = torch::zeros_like(relative);
  if (bidirectional) {
    buckets /= 2;
    result = result + relative.gt(0).to(at::kLong) * buckets;
    relative = relative.abs();
  } else {
    relative = -torch::min(relative, torch::zeros_like(relative));
  }
  int64_t max_exact = buckets / 2;
  auto is_small = relative.lt(max_exact);
  auto large = max_exact + (torch::log(relative.to(at::kFloat) / max_exact) /
                            std::log(static_cast<double>(max_distance) / max_exact) * (buckets - max_exact))
                               .to(at::kLong);
  large = torch::min(large, torch::full_like(large, buckets - 1));
  return result + torch::where(is_small, relative, large);
}

class T5Attention : public ModuleBase<T5Attention> {
 public:
  T5Attention(const ModelConfig& c, const at::TensorOptions& o, bool decoder, bool relative_bias)
      : ModuleBase("T5Attention"), is_decoder(decoder), d_kv(c.integer("d_kv")),
        buckets(c.integer("relative_attention_num_buckets")), max_distance(c.integer("relative_attention_max_distance")) {
    int64_t d = c.integer("d_model"), inner = c.integer("num_heads") * d_kv;
    for (const char* name : {"q", "k", "v"}) set_child(name, std::make_shared<Linear>(d, inner, false, o));
    set_child("o", std::make_shared<Linear>(inner, d, false, o));
    if (relative_bias)
      set_child("relative_attention_bias", std::make_shared<Embedding>(buckets, c.integer("num_heads"), c10::nullopt, o));
    set_child("dropout", std::make_shared<Dropout>(c.number("dropout_rate", 0.1)));
  }
  std::string describe() const override {
    return fmt::format("d_kv={}{}", d_kv, has_child("relative_attention_bias") ? ", relative position bias" : "");
  }
  bool is_decoder;
  int64_t d_kv, buckets, max_distance;

  /// The additive bias [1, heads, q, k] of relative positions (zeros without the bias table; heads
  /// as this rank's share of `q`'s outputs), plus `mask` when given.
  at::Tensor position_bias(int64_t q_len, int64_t k_len, const c10::optional<at::Tensor>& mask,
                           const at::TensorOptions& opts) const {
    at::Tensor bias;
    if (has_child("relative_attention_bias")) {
      auto positions = torch::arange(k_len, opts.dtype(at::kLong)).unsqueeze(0) -
                       torch::arange(q_len, opts.dtype(at::kLong)).unsqueeze(1);
      auto bucket = relative_position_bucket(positions, !is_decoder, buckets, max_distance);
      bias = call("relative_attention_bias", bucket).permute({2, 0, 1}).unsqueeze(0);
    } else {
      int64_t heads = child("q")->param("weight").size(0) / d_kv;
      bias = torch::zeros({1, heads, q_len, k_len}, opts);
    }
    return mask ? bias + *mask : bias;
  }

 protected:
  // (hidden_states, position bias with the mask in it, key_value_states or nil: self-attention)
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "T5Attention", "hidden_states");
    auto bias = tensor_arg(args, 1, "T5Attention", "position_bias");
    at::Tensor kv = args.size() > 2 && args[2].isTensor() ? args[2].toTensor() : x;
    auto q = split_heads(call("q", x), d_kv), k = split_heads(call("k", kv), d_kv), v = split_heads(call("v", kv), d_kv);
    auto scores = at::matmul(q, k.transpose(-1, -2)) + bias;  // T5 folds 1/sqrt(d_kv) into its initialisation
    auto probs = at::softmax(scores.to(at::kFloat), -1).to(scores.scalar_type());
    return call("o", merge_heads(at::matmul(call("dropout", probs), v)));
  }
};

// A sublayer: RMS-normed input -> `inner` -> dropout, added to the input.
class T5Sublayer : public ModuleBase<T5Sublayer> {
 public:
  T5Sublayer(std::string type, const char* inner_name, std::shared_ptr<Module> inner, const ModelConfig& c,
             const at::TensorOptions& o)
      : ModuleBase(std::move(type)), inner_name_(inner_name) {
    set_child(inner_name, std::move(inner));
    set_child("layer_norm", std::make_shared<RMSNorm>(c.integer("d_model"), c.number("layer_norm_epsilon", 1e-6), o,
                                                      "T5LayerNorm"));
    set_child("dropout", std::make_shared<Dropout>(c.number("dropout_rate", 0.1)));
  }

 protected:
  // (hidden_states, and for attention the position bias and key_value_states)
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, type_name().c_str(), "hidden_states");
    args[0] = call("layer_norm", x);
    return x + call("dropout", call(inner_name_, std::move(args)).toTensor());
  }

 private:
  std::string inner_name_;
};

class T5DenseActDense : public ModuleBase<T5DenseActDense> {
 public:
  T5DenseActDense(const ModelConfig& c, const at::TensorOptions& o, const T5FeedForward& kind)
      : ModuleBase(kind.gated ? "T5DenseGatedActDense" : "T5DenseActDense"), gated(kind.gated) {
    int64_t d = c.integer("d_model"), ff = c.integer("d_ff");
    if (gated) {
      set_child("wi_0", std::make_shared<Linear>(d, ff, false, o));
      set_child("wi_1", std::make_shared<Linear>(d, ff, false, o));
    } else {
      set_child("wi", std::make_shared<Linear>(d, ff, false, o));
    }
    set_child("wo", std::make_shared<Linear>(ff, d, false, o));
    set_child("dropout", std::make_shared<Dropout>(c.number("dropout_rate", 0.1)));
    set_child("act", Activation::from_hf_name(kind.activation));
  }
  bool gated;

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, type_name().c_str(), "hidden_states");
    auto h = gated ? call("act", call("wi_0", x)) * call("wi_1", x) : call("act", call("wi", x));
    return call("wo", call("dropout", h));
  }
};

class T5Block : public ModuleBase<T5Block> {
 public:
  T5Block(const ModelConfig& c, const at::TensorOptions& o, bool decoder, bool relative_bias)
      : ModuleBase("T5Block"), is_decoder(decoder) {
    std::vector<std::shared_ptr<Module>> layers;
    layers.push_back(std::make_shared<T5Sublayer>("T5LayerSelfAttention", "SelfAttention",
                                                  std::make_shared<T5Attention>(c, o, decoder, relative_bias), c, o));
    if (decoder)
      layers.push_back(std::make_shared<T5Sublayer>("T5LayerCrossAttention", "EncDecAttention",
                                                    std::make_shared<T5Attention>(c, o, true, false), c, o));
    layers.push_back(std::make_shared<T5Sublayer>("T5LayerFF", "DenseReluDense",
                                                  std::make_shared<T5DenseActDense>(c, o, t5_feed_forward(c)), c, o));
    set_child("layer", std::make_shared<ModuleList>(layers));
  }
  bool is_decoder;

 protected:
  // (hidden_states, mask, position bias or nil, and in the decoder: encoder states, encoder mask,
  // cross-attention bias or nil) -> (hidden_states, position bias[, cross-attention bias]).
  // As transformers' T5Block: the first block is given no biases and computes them from its
  // relative position table (inside its own call, where fully_shard has its parameters whole);
  // the stack hands them on to every later block.
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "T5Block", "hidden_states");
    auto layers = child("layer")->children_in_order();
    const int64_t s = x.size(1);
    Value bias = args.at(2);
    if (bias.isNone()) bias = attention(0, "SelfAttention").position_bias(s, s, optional_tensor(args.at(1)), x.options());
    Value h = (*layers[0].second)(Values{x, bias});
    if (!is_decoder) return c10::ivalue::Tuple::create({(*layers.back().second)(Values{h}), bias});
    auto enc = tensor_arg(args, 3, "T5Block", "encoder_hidden_states");
    Value cross_bias = args.at(5);
    if (cross_bias.isNone())
      cross_bias = attention(1, "EncDecAttention").position_bias(s, enc.size(1), optional_tensor(args.at(4)), x.options());
    h = (*layers[1].second)(Values{h, cross_bias, enc});
    return c10::ivalue::Tuple::create({(*layers.back().second)(Values{h}), bias, cross_bias});
  }

 private:
  static c10::optional<at::Tensor> optional_tensor(const Value& v) {
    return v.isTensor() ? c10::optional<at::Tensor>(v.toTensor()) : c10::nullopt;
  }

  // The attention `name` in sublayer `index`, which computes the bias when none is given.
  const T5Attention& attention(size_t index, const char* name) const {
    auto sublayer = child("layer")->children_in_order().at(index);
    auto* found = dynamic_cast<const T5Attention*>(sublayer.second->child(name).get());
    if (!found)
      throw Error(fmt::format("T5Block: layer.{}.{} is a {}, not a T5Attention: the first block computes the "
                              "attention bias every block uses from it, so replace the attention of later blocks, or "
                              "its q/k/v/o inside it",
                              index, name, sublayer.second->child(name)->type_name()));
    return *found;
  }
};

class T5Stack : public ModuleBase<T5Stack> {
 public:
  T5Stack(const ModelConfig& c, const at::TensorOptions& o, bool decoder, const at::Tensor& shared)
      : ModuleBase("T5Stack"), is_decoder(decoder) {
    auto embed = std::make_shared<Embedding>(shared.size(0), shared.size(1), c10::nullopt, o);
    embed->set_param("weight", shared);
    set_child("embed_tokens", embed);
    int64_t n = decoder ? c.integer("num_decoder_layers", c.integer("num_layers")) : c.integer("num_layers");
    std::vector<std::shared_ptr<Module>> blocks;
    for (int64_t i = 0; i < n; ++i) blocks.push_back(std::make_shared<T5Block>(c, o, decoder, i == 0));
    set_child("block", std::make_shared<ModuleList>(blocks));
    set_child("final_layer_norm", std::make_shared<RMSNorm>(c.integer("d_model"), c.number("layer_norm_epsilon", 1e-6),
                                                            o, "T5LayerNorm"));
    set_child("dropout", std::make_shared<Dropout>(c.number("dropout_rate", 0.1)));
  }
  std::string describe() const override { return is_decoder ? "decoder" : "encoder"; }
  bool is_decoder;

 protected:
  // (input_ids, attention_mask or nil, and in the decoder: encoder states, encoder attention_mask or nil)
  Value forward(Values args) override {
    auto ids = tensor_arg(args, 0, "T5Stack", "input_ids");
    check_token_ids(ids, "T5Stack");
    c10::optional<at::Tensor> padding;
    if (args.size() > 1 && args[1].isTensor()) padding = args[1].toTensor();
    auto x = call("dropout", call("embed_tokens", ids));
    const int64_t s = ids.size(1);
    // transformers' masks add (1 - mask) * lowest; a decoder's is causal too
    auto self_mask = additive_mask(padding, s, s, is_decoder, x.options());
    Value mask = self_mask ? Value(*self_mask) : Value();
    Value encoder_states, encoder_mask;
    if (is_decoder) {
      auto enc = tensor_arg(args, 2, "T5Stack", "encoder_hidden_states");
      c10::optional<at::Tensor> enc_padding;
      if (args.size() > 3 && args[3].isTensor()) enc_padding = args[3].toTensor();
      encoder_states = enc;
      if (auto m = additive_mask(enc_padding, s, enc.size(1), false, x.options())) encoder_mask = *m;
    }
    Value h = x, bias, cross_bias;  // none until the first block has computed them
    for (auto& [name, block] : child("block")->children_in_order()) {
      auto out = (*block)(Values{h, mask, bias, encoder_states, encoder_mask, cross_bias}).toTuple();
      h = out->elements().at(0);
      bias = out->elements().at(1);
      if (is_decoder) cross_bias = out->elements().at(2);
    }
    return call("dropout", call("final_layer_norm", h.toTensor()));
  }
};

const std::vector<std::string> kT5Keywords = {"attention_mask", "decoder_input_ids", "decoder_attention_mask",
                                              "labels"};

class T5ForConditionalGeneration : public ModuleBase<T5ForConditionalGeneration>, public HasConfig {
 public:
  T5ForConditionalGeneration(const ModelConfig& c, const at::TensorOptions& o)
      : ModuleBase("T5ForConditionalGeneration"), HasConfig(c), d_model(c.integer("d_model")),
        vocab(c.integer("vocab_size")), tied(c.flag("tie_word_embeddings", true)), start_id(c.integer("decoder_start_token_id", 0)),
        pad_id(c.integer("pad_token_id", 0)) {
    auto shared = std::make_shared<Embedding>(vocab, d_model, c10::nullopt, o);
    set_child("shared", shared);
    set_child("encoder", std::make_shared<T5Stack>(c, o, false, shared->param("weight")));
    set_child("decoder", std::make_shared<T5Stack>(c, o, true, shared->param("weight")));
    auto head = std::make_shared<Linear>(d_model, vocab, false, o);
    if (tied) head->set_param("weight", shared->param("weight"));
    set_child("lm_head", head);
  }
  int64_t d_model, vocab;  // the whole vocabulary, also when lm_head holds one rank's rows of it
  bool tied;
  int64_t start_id, pad_id;

 protected:
  // (input_ids, {attention_mask=, decoder_input_ids=, decoder_attention_mask=, labels=}) -> the
  // decoder's logits, or the loss with labels (decoder inputs then made from them when not given)
  Value forward(Values args) override {
    const char* who = "T5ForConditionalGeneration";
    auto ids = tensor_arg(args, 0, who, "input_ids");
    auto kw = kwargs_arg(args, 1);
    check_kwargs(kw, kT5Keywords, who);
    auto labels = kwarg_tensor(kw, "labels");
    auto decoder_ids = kwarg_tensor(kw, "decoder_input_ids");
    if (!decoder_ids && !labels)
      throw Error(fmt::format("{}: give decoder_input_ids (the decoder's tokens) or labels (the decoder's inputs are "
                              "then the labels shifted right after decoder_start_token_id {}), or both",
                              who, start_id));
    // before the shift feeds them to the decoder's embedding, whose error would name only itself
    if (labels) check_label_range(*labels, vocab, who);
    if (!decoder_ids) decoder_ids = shift_right(*labels);
    auto mask = kwarg_tensor(kw, "attention_mask");
    auto encoded = call("encoder", Values{ids, mask ? Value(*mask) : Value()}).toTensor();
    auto decoder_mask = kwarg_tensor(kw, "decoder_attention_mask");
    auto decoded = call("decoder", Values{*decoder_ids, decoder_mask ? Value(*decoder_mask) : Value(), encoded,
                                          mask ? Value(*mask) : Value()})
                       .toTensor();
    if (tied) decoded = decoded * std::pow(static_cast<double>(d_model), -0.5);  // transformers rescales a tied head
    auto logits = call("lm_head", decoded);
    if (labels) return masked_lm_loss(logits, *labels, who);
    return logits;
  }

 private:
  // transformers' _shift_right: decoder_start_token_id, then the labels but the last, -100 as padding
  at::Tensor shift_right(const at::Tensor& labels) const {
    auto shifted = at::constant_pad_nd(labels.narrow(1, 0, labels.size(1) - 1), {1, 0}, static_cast<double>(start_id));
    return shifted.masked_fill(shifted.eq(-100), pad_id);
  }
};

// The standard deviation transformers' T5PreTrainedModel._init_weights gives the weight of `name`,
// a child of a module of type `parent` (every scale derived from the widths, times
// initializer_factor), or 0 when it gives none by this rule.
double t5_weight_std(const std::string& parent, const std::string& name, const ModelConfig& c) {
  const double f = c.number("initializer_factor", 1.0);
  const double d = static_cast<double>(c.integer("d_model")), kv = static_cast<double>(c.integer("d_kv"));
  const double heads = static_cast<double>(c.integer("num_heads")), ff = static_cast<double>(c.integer("d_ff"));
  if (parent == "T5Attention") {
    if (name == "q") return f * std::pow(d * kv, -0.5);
    if (name == "k" || name == "v" || name == "relative_attention_bias") return f * std::pow(d, -0.5);
    if (name == "o") return f * std::pow(heads * kv, -0.5);
  } else if (parent == "T5DenseActDense" || parent == "T5DenseGatedActDense") {
    if (name == "wi" || name == "wi_0" || name == "wi_1") return f * std::pow(d, -0.5);
    if (name == "wo") return f * std::pow(ff, -0.5);
  }
  return 0.0;
}

}  // namespace

// transformers' T5PreTrainedModel._init_weights, one module at a time in module order (the order
// transformers draws in: q, k, v, o, the bias table; wi, wo), each module's own parameters between
// `hooks`' calls.
void init_weights_t5(Module& root, const ModelConfig& c, const InitHooks& hooks) {
  torch::NoGradGuard no_grad;
  const double f = c.number("initializer_factor", 1.0);
  const bool tied = c.flag("tie_word_embeddings", true);
  std::function<void(Module&, const std::string&, const std::string&, const std::string&)> visit =
      [&](Module& m, const std::string& path, const std::string& parent, const std::string& name) {
        if (hooks.before) hooks.before(m);
        if (dynamic_cast<RMSNorm*>(&m)) {
          m.param("weight").fill_(f);
        } else if (path == "shared" || (path == "lm_head" && !tied)) {
          m.param("weight").normal_(0.0, f);
        } else if (double std = t5_weight_std(parent, name, c); std > 0) {
          m.param("weight").normal_(0.0, std);
        }
        if (hooks.after) hooks.after(m);
        for (auto& [child_name, child] : m.children_in_order())
          visit(*child, path.empty() ? child_name : path + "." + child_name, m.type_name(), child_name);
      };
  visit(root, "", "", "");
}

namespace {

}  // namespace

std::shared_ptr<Module> build_t5(const ModelConfig& config, const BuildOptions& options) {
  auto c = config.with_defaults("t5");
  check_config(c);
  t5_feed_forward(c);  // refuses a malformed feed_forward_proj before anything is built
  auto model = std::make_shared<T5ForConditionalGeneration>(c, options.tensor_options);
  if (options.init_weights && options.tensor_options.device() != at::kMeta) {
    init_weights_t5(*model, c);
  }
  return model;
}

}  // namespace slapo
