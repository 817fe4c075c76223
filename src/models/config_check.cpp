// The field tables of the zoo's model types and the checks that refuse what would change the math.
#include "models/config_check.h"

#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <map>

#include "core/error.h"

namespace slapo {

namespace {

// A field's value as written: a Lua table's NaN says NaN here, where JSON's text would say null.
std::string value_text(const nlohmann::json& v) {
  if (v.is_number_float() && std::isnan(v.get<double>())) return "NaN";
  if (v.is_number_float() && std::isinf(v.get<double>())) return v.get<double>() > 0 ? "infinity" : "-infinity";
  return v.dump();
}

using nlohmann::json;

enum class Kind {
  Size,         // integer in [1, 2^24]: widths, vocabularies, positions, head counts
  Layers,       // integer in [1, 4096]
  Count,        // integer >= 0
  OptionalSize, // null or a Size
  Probability,  // number in [0, 1]
  Positive,     // number > 0: epsilons, rope_theta
  NonNegative,  // number >= 0: initializer_range
  Flag,         // true or false
  Text,         // a string
  Harmless,     // anything: does not change the computation
};

using Table = std::map<std::string, Kind>;

// Fields every transformers config may carry that change nothing the zoo computes.
const Table& common_fields() {
  static const Table table = [] {
    Table t;
    for (const char* name :
         {"architectures", "transformers_version", "model_type", "use_cache", "bos_token_id", "eos_token_id",
          "sep_token_id", "decoder_start_token_id", "output_attentions", "output_hidden_states", "return_dict",
          "torchscript", "use_return_dict", "tie_encoder_decoder", "chunk_size_feed_forward", "problem_type",
          "id2label", "label2id", "num_labels", "finetuning_task", "tokenizer_class", "prefix",
          "task_specific_params", "_name_or_path", "name_or_path", "_attn_implementation_autoset", "_commit_hash",
          "gradient_checkpointing", "classifier_dropout", "use_bfloat16", "tf_legacy_loss",
          "cross_attention_hidden_size", "output_past", "add_cross_attention", "is_encoder_decoder",
          "pruned_heads", "is_decoder",
          // generation settings
          "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
          "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty", "length_penalty",
          "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids", "num_return_sequences",
          "output_scores", "return_dict_in_generate", "forced_bos_token_id", "forced_eos_token_id",
          "remove_invalid_values", "exponential_decay_length_penalty", "suppress_tokens", "begin_suppress_tokens"})
      t[name] = Kind::Harmless;
    t["dtype"] = Kind::Text;
    t["torch_dtype"] = Kind::Text;
    t["attn_implementation"] = Kind::Text;
    t["initializer_range"] = Kind::NonNegative;
    t["tie_word_embeddings"] = Kind::Flag;
    return t;
  }();
  return table;
}

const Table& llama_family_fields() {
  static const Table table = {
      {"vocab_size", Kind::Size},         {"hidden_size", Kind::Size},
      {"intermediate_size", Kind::Size},  {"num_hidden_layers", Kind::Layers},
      {"num_attention_heads", Kind::Size}, {"num_key_value_heads", Kind::OptionalSize},
      {"head_dim", Kind::OptionalSize},    {"hidden_act", Kind::Text},
      {"max_position_embeddings", Kind::Size}, {"rms_norm_eps", Kind::Positive},
      {"rope_theta", Kind::Positive},      {"rope_scaling", Kind::Harmless},  // read by rope_from_config
      {"rope_parameters", Kind::Harmless}, {"attention_dropout", Kind::Probability},
      {"pad_token_id", Kind::Harmless}};
  return table;
}

Table type_fields(const std::string& model_type) {
  if (model_type == "bert" || model_type == "roberta")
    return {{"vocab_size", Kind::Size},           {"hidden_size", Kind::Size},
            {"num_hidden_layers", Kind::Layers},  {"num_attention_heads", Kind::Size},
            {"intermediate_size", Kind::Size},    {"hidden_act", Kind::Text},
            {"hidden_dropout_prob", Kind::Probability}, {"attention_probs_dropout_prob", Kind::Probability},
            {"max_position_embeddings", Kind::Size}, {"type_vocab_size", Kind::Size},
            {"layer_norm_eps", Kind::Positive},   {"position_embedding_type", Kind::Text},
            {"is_decoder", Kind::Flag},           {"pad_token_id", Kind::Harmless}};
  if (model_type == "gpt2")
    return {{"vocab_size", Kind::Size},     {"n_positions", Kind::Size},       {"n_ctx", Kind::Harmless},
            {"n_embd", Kind::Size},         {"n_layer", Kind::Layers},         {"n_head", Kind::Size},
            {"n_inner", Kind::OptionalSize}, {"activation_function", Kind::Text},
            {"resid_pdrop", Kind::Probability}, {"embd_pdrop", Kind::Probability},
            {"attn_pdrop", Kind::Probability}, {"layer_norm_epsilon", Kind::Positive},
            {"scale_attn_weights", Kind::Flag}, {"scale_attn_by_inverse_layer_idx", Kind::Flag},
            {"reorder_and_upcast_attn", Kind::Flag}, {"summary_type", Kind::Harmless},
            {"summary_use_proj", Kind::Harmless}, {"summary_activation", Kind::Harmless},
            {"summary_proj_to_labels", Kind::Harmless}, {"summary_first_dropout", Kind::Harmless},
            {"pad_token_id", Kind::Harmless}};
  if (model_type == "albert")
    return {{"vocab_size", Kind::Size},           {"embedding_size", Kind::Size},
            {"hidden_size", Kind::Size},          {"num_hidden_layers", Kind::Layers},
            {"num_hidden_groups", Kind::Layers},  {"num_attention_heads", Kind::Size},
            {"intermediate_size", Kind::Size},    {"inner_group_num", Kind::Layers},
            {"hidden_act", Kind::Text},           {"hidden_dropout_prob", Kind::Probability},
            {"attention_probs_dropout_prob", Kind::Probability}, {"max_position_embeddings", Kind::Size},
            {"type_vocab_size", Kind::Size},      {"layer_norm_eps", Kind::Positive},
            {"position_embedding_type", Kind::Text}, {"classifier_dropout_prob", Kind::Harmless},
            {"is_decoder", Kind::Harmless},  // AlbertModel masks bidirectionally whatever it says
            {"pad_token_id", Kind::Harmless}};
  if (model_type == "t5")
    return {{"vocab_size", Kind::Size},         {"d_model", Kind::Size},
            {"d_kv", Kind::Size},               {"d_ff", Kind::Size},
            {"num_layers", Kind::Layers},       {"num_decoder_layers", Kind::OptionalSize},
            {"num_heads", Kind::Size},          {"relative_attention_num_buckets", Kind::Size},
            {"relative_attention_max_distance", Kind::Size}, {"dropout_rate", Kind::Probability},
            {"layer_norm_epsilon", Kind::Positive}, {"initializer_factor", Kind::NonNegative},
            {"feed_forward_proj", Kind::Text},  {"is_gated_act", Kind::Flag},
            {"dense_act_fn", Kind::Text},       {"decoder_start_token_id", Kind::Count},
            {"n_positions", Kind::Harmless},    // older T5 configs: T5 has no position table
            {"pad_token_id", Kind::Harmless}};
  if (model_type == "gpt_neo")
    return {{"vocab_size", Kind::Size},          {"max_position_embeddings", Kind::Size},
            {"hidden_size", Kind::Size},         {"num_layers", Kind::Layers},
            {"attention_types", Kind::Harmless}, {"attention_layers", Kind::Harmless},  // gpt_neo_attention_layers
            {"num_heads", Kind::Size},           {"intermediate_size", Kind::OptionalSize},
            {"window_size", Kind::Size},         {"activation_function", Kind::Text},
            {"resid_dropout", Kind::Probability}, {"embed_dropout", Kind::Probability},
            {"attention_dropout", Kind::Probability}, {"layer_norm_epsilon", Kind::Positive},
            {"summary_type", Kind::Harmless},    {"summary_use_proj", Kind::Harmless},
            {"summary_activation", Kind::Harmless}, {"summary_proj_to_labels", Kind::Harmless},
            {"summary_first_dropout", Kind::Harmless}, {"pad_token_id", Kind::Harmless}};
  if (model_type == "opt")
    return {{"vocab_size", Kind::Size},          {"hidden_size", Kind::Size},
            {"num_hidden_layers", Kind::Layers}, {"ffn_dim", Kind::Size},
            {"max_position_embeddings", Kind::Size}, {"do_layer_norm_before", Kind::Flag},
            {"_remove_final_layer_norm", Kind::Flag}, {"word_embed_proj_dim", Kind::OptionalSize},
            {"dropout", Kind::Probability},      {"attention_dropout", Kind::Probability},
            {"activation_dropout", Kind::Harmless},  // in OPT's checkpoints; transformers' OPT never reads it
            {"num_attention_heads", Kind::Size}, {"activation_function", Kind::Text},
            {"layerdrop", Kind::Probability},    {"init_std", Kind::NonNegative},
            {"enable_bias", Kind::Flag},         {"layer_norm_elementwise_affine", Kind::Flag},
            {"pad_token_id", Kind::Harmless}};
  if (model_type == "llama" || model_type == "qwen2" || model_type == "mistral" || model_type == "mixtral") {
    Table t = llama_family_fields();
    if (model_type == "llama") {
      t["attention_bias"] = Kind::Flag;
      t["mlp_bias"] = Kind::Flag;
      t["pretraining_tp"] = Kind::Size;  // transformers slices the matmuls: the same math
    } else {
      t["sliding_window"] = Kind::OptionalSize;
    }
    if (model_type == "mixtral") {
      t["num_local_experts"] = Kind::Size;
      t["num_experts_per_tok"] = Kind::Size;
      t["output_router_logits"] = Kind::Flag;
      t["router_aux_loss_coef"] = Kind::NonNegative;
      t["router_jitter_noise"] = Kind::Probability;
    }
    if (model_type == "qwen2") {
      t["use_sliding_window"] = Kind::Flag;
      t["max_window_layers"] = Kind::Count;
      t["layer_types"] = Kind::Harmless;  // checked below
    }
    return t;
  }
  if (model_type == "mlp")
    return {{"hidden_size", Kind::Size}, {"intermediate_size", Kind::OptionalSize}, {"hidden_act", Kind::Text},
            {"dropout", Kind::Probability}, {"bias", Kind::Flag}};
  throw_unknown_model_type(model_type, "config");
}

std::string range_of(Kind kind) {
  switch (kind) {
    case Kind::Size: return "an integer from 1 to 16777216";
    case Kind::Layers: return "an integer from 1 to 4096";
    case Kind::Count: return "an integer >= 0";
    case Kind::OptionalSize: return "null or an integer from 1 to 16777216";
    case Kind::Probability: return "a number from 0 to 1";
    case Kind::Positive: return "a number > 0";
    case Kind::NonNegative: return "a number >= 0";
    case Kind::Flag: return "true or false";
    case Kind::Text: return "a string";
    case Kind::Harmless: return "anything";
  }
  return "";
}

bool is_integer(const json& v) {
  if (v.is_number_integer()) return true;
  return v.is_number_float() && std::isfinite(v.get<double>()) && v.get<double>() == std::floor(v.get<double>());
}

bool in_range(Kind kind, const json& v) {
  auto integer_in = [&](double lo, double hi) {
    return is_integer(v) && v.get<double>() >= lo && v.get<double>() <= hi;
  };
  switch (kind) {
    case Kind::Size: return integer_in(1, 16777216);
    case Kind::Layers: return integer_in(1, 4096);
    case Kind::Count: return integer_in(0, 9.2e18);
    case Kind::OptionalSize: return v.is_null() || integer_in(1, 16777216);
    case Kind::Probability: return v.is_number() && v.get<double>() >= 0 && v.get<double>() <= 1;
    case Kind::Positive: return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() > 0;
    case Kind::NonNegative: return v.is_number() && std::isfinite(v.get<double>()) && v.get<double>() >= 0;
    case Kind::Flag: return v.is_boolean();
    case Kind::Text: return v.is_string();
    case Kind::Harmless: return true;
  }
  return false;
}

// Refusals: fields whose values the zoo does not implement.
void refuse_unimplemented(const ModelConfig& c, const std::string& type) {
  const json& f = c.json();
  auto refuse = [&](const std::string& field, const std::string& supported) {
    throw Error(fmt::format("config: {} field '{}' = {} is not supported ({}); the model would compute something "
                            "other than transformers does",
                            type, field, f[field].dump(), supported));
  };
  auto is_true = [&](const char* key) { return f.contains(key) && f[key].is_boolean() && f[key].get<bool>(); };
  if (type == "albert" && c.integer("num_hidden_groups", 1) > c.integer("num_hidden_layers", 12))
    throw Error(fmt::format("config: albert field 'num_hidden_groups' = {} is more than num_hidden_layers = {}: "
                            "each group must be used by at least one layer (1 to {})",
                            c.integer("num_hidden_groups", 1), c.integer("num_hidden_layers", 12),
                            c.integer("num_hidden_layers", 12)));
  if (is_true("add_cross_attention")) refuse("add_cross_attention", "false: the zoo has no cross-attention");
  if (type != "t5" && is_true("is_encoder_decoder"))
    refuse("is_encoder_decoder", "false: decoder or encoder models only (T5 is the zoo's encoder-decoder)");
  if (type == "t5" && f.contains("is_encoder_decoder") && !is_true("is_encoder_decoder"))
    refuse("is_encoder_decoder", "true: T5ForConditionalGeneration; T5EncoderModel is not in the zoo");
  if (f.contains("pruned_heads") && !f["pruned_heads"].is_null() && !f["pruned_heads"].empty())
    refuse("pruned_heads", "none: every layer keeps all its heads");
  if (f.contains("quantization_config") && !f["quantization_config"].is_null())
    refuse("quantization_config", "unquantized float32, float16 or bfloat16 checkpoints");
  // other mixtures of experts' routing: Mixtral's is a softmax over all experts, the top k
  // renormalised, every layer sparse, no shared expert
  static const std::vector<std::pair<const char*, const char*>> other_moe = {
      {"shared_expert_intermediate_size", "Qwen2-MoE's shared expert"},
      {"n_shared_experts", "DeepSeek's shared experts"},
      {"moe_intermediate_size", "Qwen-MoE's and DeepSeek's expert width"},
      {"num_experts", "Qwen-MoE's expert count (Mixtral's is num_local_experts)"},
      {"norm_topk_prob", "Qwen-MoE's choice to renormalise the top k"},
      {"decoder_sparse_step", "Qwen-MoE's dense layers between sparse ones"},
      {"mlp_only_layers", "Qwen-MoE's dense layers"},
      {"first_k_dense_replace", "DeepSeek's dense first layers"},
      {"moe_layer_freq", "DeepSeek's dense layers between sparse ones"},
      {"scoring_func", "DeepSeek-V3's sigmoid gate"},
      {"topk_method", "DeepSeek's grouped routing"},
      {"n_group", "DeepSeek's grouped routing"},
      {"topk_group", "DeepSeek's grouped routing"},
      {"routed_scaling_factor", "DeepSeek's scaled routing weights"}};
  for (auto& [field, what] : other_moe)
    if (f.contains(field) && !f[field].is_null())
      refuse(field, fmt::format("it is {}; the zoo routes as Mixtral does: a softmax over num_local_experts, the top "
                                "num_experts_per_tok renormalised, every layer sparse, no shared expert",
                                what));
  if (type == "opt" && c.number("layerdrop", 0.0) != 0.0)
    refuse("layerdrop", "0: every layer runs in every step; transformers skips layers at random while training");
  if (type == "opt" && !c.flag("layer_norm_elementwise_affine", true))
    refuse("layer_norm_elementwise_affine", "true: every LayerNorm has a weight and a bias");
  if (type == "roberta" && c.flag("is_decoder", false))
    refuse("is_decoder", "false: RobertaForMaskedLM; RobertaForCausalLM is not in the zoo");
  if ((type == "bert" || type == "roberta" || type == "albert") &&
      c.str("position_embedding_type", "absolute") != "absolute")
    refuse("position_embedding_type", "\"absolute\"");
  for (const char* key : {"dtype", "torch_dtype"}) {
    std::string d = c.str(key, "float32");
    if (d != "float32" && d != "float16" && d != "bfloat16" && d != "float64" && d != "auto")
      refuse(key, "float32, float16, bfloat16, float64");
  }
  std::string impl = c.str("attn_implementation", "eager");
  if (impl != "eager" && impl != "sdpa" && impl != "flash_attention_2" && impl != "flash_attention_3" &&
      impl != "flex_attention" && impl != "auto")
    refuse("attn_implementation", "eager, sdpa, auto (flash_attention_2, flash_attention_3 and flex_attention run "
                                  "as sdpa)");
  if (type == "qwen2" && c.has("layer_types")) {
    const json& types = f["layer_types"];
    if (!types.is_array() || static_cast<int64_t>(types.size()) != c.integer("num_hidden_layers"))
      throw Error(fmt::format("config: qwen2 field 'layer_types' must list one type per layer ({} layers), got {}",
                              c.integer("num_hidden_layers"), types.dump()));
    for (auto& t : types)
      if (!t.is_string() || (t != "full_attention" && t != "sliding_attention"))
        throw Error(fmt::format("config: qwen2 field 'layer_types' holds {} (supported: \"full_attention\", "
                                "\"sliding_attention\")",
                                t.dump()));
  }
}

// A padding row must exist: an Embedding's padding_idx indexes its rows. A negative id is how
// older configs say "none" (ModelConfig::pad_token_id reads it so), which the user is told.
void check_padding_id(const ModelConfig& c, const std::string& type) {
  if (type == "gpt2" || type == "gpt_neo" || type == "mlp" || !c.has("pad_token_id")) return;
  const json& v = c.json()["pad_token_id"];
  int64_t vocab = c.integer("vocab_size");
  if (is_integer(v) && v.get<double>() < 0) {
    fmt::print(stderr, "config: {} field 'pad_token_id' = {} is treated as no pad token\n", type, v.dump());
    return;
  }
  if (!is_integer(v) || v.get<double>() >= static_cast<double>(vocab))
    throw Error(fmt::format("config: {} field 'pad_token_id' = {} must be null, negative (no pad token) or a token "
                            "id from 0 to {}", type, v.dump(), vocab - 1));
}

}  // namespace

std::vector<std::string> check_config_fields(const ModelConfig& config) {
  const std::string type = config.model_type();
  Table fields = type_fields(type);
  const Table& common = common_fields();
  std::vector<std::string> unknown;
  for (auto& [name, value] : config.json().items()) {
    auto rule = fields.find(name);
    Kind kind;
    if (rule != fields.end()) kind = rule->second;
    else if (common.count(name)) kind = common.at(name);
    else {
      unknown.push_back(name);
      continue;
    }
    if (kind == Kind::Harmless || value.is_null()) continue;  // null: the class default
    if (!in_range(kind, value))
      throw Error(fmt::format("config: {} field '{}' must be {}, got {}", type, name, range_of(kind), value_text(value)));
  }
  refuse_unimplemented(config, type);
  check_padding_id(config, type);
  return unknown;
}

void check_config(const ModelConfig& config) {
  auto unknown = check_config_fields(config);
  if (unknown.empty()) return;
  std::vector<std::string> known;
  for (auto& [name, kind] : type_fields(config.model_type())) known.push_back(name);
  std::string hint;
  for (auto& name : unknown) {
    auto close = closest_names(name, known, 1);
    if (!close.empty()) hint += fmt::format("{}'{}' for '{}'", hint.empty() ? " (did you mean " : ", ", close[0], name);
  }
  if (!hint.empty()) hint += "?)";
  fmt::print(stderr, "config: the {} model ignores {} field{} it does not know: {}{}\n", config.model_type(),
             unknown.size(), unknown.size() == 1 ? "" : "s", join_or_none(unknown), hint);
}

}  // namespace slapo
