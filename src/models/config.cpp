// Config field access with HF defaults, and the named presets.
#include "models/config.h"

#include <cmath>

#include "core/error.h"

namespace slapo {

using nlohmann::json;

namespace {

// Defaults of transformers' BertConfig, GPT2Config, LlamaConfig, and of our MLP.
const json& class_defaults(const std::string& model_type) {
  static const json bert = {
      {"vocab_size", 30522}, {"hidden_size", 768}, {"num_hidden_layers", 12},
      {"num_attention_heads", 12}, {"intermediate_size", 3072}, {"hidden_act", "gelu"},
      {"hidden_dropout_prob", 0.1}, {"attention_probs_dropout_prob", 0.1},
      {"max_position_embeddings", 512}, {"type_vocab_size", 2}, {"initializer_range", 0.02},
      {"layer_norm_eps", 1e-12}, {"pad_token_id", 0}, {"is_decoder", false},
      {"tie_word_embeddings", true}, {"architectures", {"BertLMHeadModel"}}};
  static const json gpt2 = {
      {"vocab_size", 50257}, {"n_positions", 1024}, {"n_embd", 768}, {"n_layer", 12},
      {"n_head", 12}, {"n_inner", nullptr}, {"activation_function", "gelu_new"},
      {"resid_pdrop", 0.1}, {"embd_pdrop", 0.1}, {"attn_pdrop", 0.1},
      {"layer_norm_epsilon", 1e-5}, {"initializer_range", 0.02}, {"tie_word_embeddings", true},
      {"architectures", {"GPT2LMHeadModel"}}};
  static const json llama = {
      {"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 11008},
      {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"num_key_value_heads", nullptr},
      {"hidden_act", "silu"}, {"max_position_embeddings", 2048}, {"initializer_range", 0.02},
      {"rms_norm_eps", 1e-6}, {"tie_word_embeddings", false}, {"rope_theta", 10000.0},
      {"attention_bias", false}, {"attention_dropout", 0.0}, {"mlp_bias", false},
      {"pad_token_id", nullptr}, {"architectures", {"LlamaForCausalLM"}}};
  // Qwen2Config: LLaMA's shape with q/k/v biases (its attention has no attention_bias field)
  static const json qwen2 = {
      {"vocab_size", 151936}, {"hidden_size", 4096}, {"intermediate_size", 22016},
      {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"num_key_value_heads", 32},
      {"hidden_act", "silu"}, {"max_position_embeddings", 32768}, {"initializer_range", 0.02},
      {"rms_norm_eps", 1e-6}, {"tie_word_embeddings", false}, {"rope_theta", 10000.0},
      {"use_sliding_window", false}, {"sliding_window", 4096}, {"max_window_layers", 28},
      {"attention_dropout", 0.0}, {"pad_token_id", nullptr}, {"architectures", {"Qwen2ForCausalLM"}}};
  // MistralConfig: LLaMA's shape without biases, every layer attending to a sliding window
  static const json mistral = {
      {"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 14336},
      {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"num_key_value_heads", 8},
      {"head_dim", nullptr}, {"hidden_act", "silu"}, {"max_position_embeddings", 4096 * 32},
      {"initializer_range", 0.02}, {"rms_norm_eps", 1e-6}, {"tie_word_embeddings", false},
      {"rope_theta", 10000.0}, {"sliding_window", 4096}, {"attention_dropout", 0.0},
      {"pad_token_id", nullptr}, {"architectures", {"MistralForCausalLM"}}};
  // MixtralConfig: Mistral's attention, 8 SwiGLU experts of which each token's router picks 2
  static const json mixtral = {
      {"vocab_size", 32000}, {"hidden_size", 4096}, {"intermediate_size", 14336},
      {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"num_key_value_heads", 8},
      {"head_dim", nullptr}, {"hidden_act", "silu"}, {"max_position_embeddings", 4096 * 32},
      {"initializer_range", 0.02}, {"rms_norm_eps", 1e-5}, {"tie_word_embeddings", false},
      {"rope_theta", 1e6}, {"sliding_window", nullptr}, {"attention_dropout", 0.0},
      {"num_experts_per_tok", 2}, {"num_local_experts", 8}, {"output_router_logits", false},
      {"router_aux_loss_coef", 0.001}, {"router_jitter_noise", 0.0},
      {"pad_token_id", nullptr}, {"architectures", {"MixtralForCausalLM"}}};
  // RobertaConfig: BERT's fields with RoBERTa's padding id and vocabulary
  static const json roberta = {
      {"vocab_size", 50265}, {"hidden_size", 768}, {"num_hidden_layers", 12},
      {"num_attention_heads", 12}, {"intermediate_size", 3072}, {"hidden_act", "gelu"},
      {"hidden_dropout_prob", 0.1}, {"attention_probs_dropout_prob", 0.1},
      {"max_position_embeddings", 512}, {"type_vocab_size", 2}, {"initializer_range", 0.02},
      {"layer_norm_eps", 1e-12}, {"pad_token_id", 1}, {"bos_token_id", 0}, {"eos_token_id", 2},
      {"is_decoder", false}, {"tie_word_embeddings", true}, {"architectures", {"RobertaForMaskedLM"}}};
  // AlbertConfig (albert-xxlarge's shape, the class default)
  static const json albert = {
      {"vocab_size", 30000}, {"embedding_size", 128}, {"hidden_size", 4096}, {"num_hidden_layers", 12},
      {"num_hidden_groups", 1}, {"num_attention_heads", 64}, {"intermediate_size", 16384},
      {"inner_group_num", 1}, {"hidden_act", "gelu_new"}, {"hidden_dropout_prob", 0.0},
      {"attention_probs_dropout_prob", 0.0}, {"max_position_embeddings", 512}, {"type_vocab_size", 2},
      {"initializer_range", 0.02}, {"layer_norm_eps", 1e-12}, {"pad_token_id", 0}, {"bos_token_id", 2},
      {"eos_token_id", 3}, {"tie_word_embeddings", true}, {"architectures", {"AlbertForMaskedLM"}}};
  // T5Config (t5-small's shape)
  static const json t5 = {
      {"vocab_size", 32128}, {"d_model", 512}, {"d_kv", 64}, {"d_ff", 2048}, {"num_layers", 6},
      {"num_decoder_layers", nullptr}, {"num_heads", 8}, {"relative_attention_num_buckets", 32},
      {"relative_attention_max_distance", 128}, {"dropout_rate", 0.1}, {"layer_norm_epsilon", 1e-6},
      {"initializer_factor", 1.0}, {"feed_forward_proj", "relu"}, {"is_encoder_decoder", true},
      {"pad_token_id", 0}, {"eos_token_id", 1}, {"decoder_start_token_id", 0}, {"tie_word_embeddings", true},
      {"architectures", {"T5ForConditionalGeneration"}}};
  // GPTNeoConfig: attention_types expands to one "global" or "local" per layer
  static const json gpt_neo = {
      {"vocab_size", 50257}, {"max_position_embeddings", 2048}, {"hidden_size", 2048}, {"num_layers", 24},
      {"attention_types", json::array({json::array({json::array({"global", "local"}), 12})})},
      {"num_heads", 16}, {"intermediate_size", nullptr}, {"window_size", 256},
      {"activation_function", "gelu_new"}, {"resid_dropout", 0.0}, {"embed_dropout", 0.0},
      {"attention_dropout", 0.0}, {"layer_norm_epsilon", 1e-5}, {"initializer_range", 0.02},
      {"bos_token_id", 50256}, {"eos_token_id", 50256}, {"tie_word_embeddings", true},
      {"architectures", {"GPTNeoForCausalLM"}}};
  // OPTConfig (opt-125m's shape); init_std is its initializer_range
  static const json opt = {
      {"vocab_size", 50272}, {"hidden_size", 768}, {"num_hidden_layers", 12}, {"ffn_dim", 3072},
      {"max_position_embeddings", 2048}, {"do_layer_norm_before", true}, {"_remove_final_layer_norm", false},
      {"word_embed_proj_dim", nullptr}, {"dropout", 0.1}, {"attention_dropout", 0.0},
      {"num_attention_heads", 12}, {"activation_function", "relu"}, {"layerdrop", 0.0}, {"init_std", 0.02},
      {"enable_bias", true}, {"layer_norm_elementwise_affine", true}, {"pad_token_id", 1},
      {"bos_token_id", 2}, {"eos_token_id", 2}, {"tie_word_embeddings", true},
      {"architectures", {"OPTForCausalLM"}}};
  static const json mlp = {{"hidden_size", 1024}, {"intermediate_size", nullptr},
                           {"hidden_act", "gelu"}, {"dropout", 0.0}, {"bias", true},
                           {"initializer_range", 0.02}};
  if (model_type == "bert") return bert;
  if (model_type == "gpt2") return gpt2;
  if (model_type == "llama") return llama;
  if (model_type == "qwen2") return qwen2;
  if (model_type == "mistral") return mistral;
  if (model_type == "mixtral") return mixtral;
  if (model_type == "roberta") return roberta;
  if (model_type == "albert") return albert;
  if (model_type == "t5") return t5;
  if (model_type == "gpt_neo") return gpt_neo;
  if (model_type == "opt") return opt;
  if (model_type == "mlp") return mlp;
  throw_unknown_model_type(model_type, "config");
}

const std::vector<std::pair<std::string, json>>& presets() {
  static const std::vector<std::pair<std::string, json>> table = {
      {"bert-base-uncased", {{"model_type", "bert"}}},
      {"bert-large-uncased",
       {{"model_type", "bert"}, {"hidden_size", 1024}, {"num_hidden_layers", 24},
        {"num_attention_heads", 16}, {"intermediate_size", 4096}}},
      // FacebookAI's RoBERTa: positions start after padding_idx 1, so 514 rows for 512 tokens
      {"roberta-base", {{"model_type", "roberta"}, {"max_position_embeddings", 514}, {"type_vocab_size", 1},
                        {"layer_norm_eps", 1e-5}}},
      {"roberta-large", {{"model_type", "roberta"}, {"hidden_size", 1024}, {"num_hidden_layers", 24},
                         {"num_attention_heads", 16}, {"intermediate_size", 4096}, {"max_position_embeddings", 514},
                         {"type_vocab_size", 1}, {"layer_norm_eps", 1e-5}}},
      // Google's ALBERT v2: one shared layer applied num_hidden_layers times
      {"albert-base-v2", {{"model_type", "albert"}, {"hidden_size", 768}, {"num_attention_heads", 12},
                          {"intermediate_size", 3072}}},
      {"albert-large-v2", {{"model_type", "albert"}, {"hidden_size", 1024}, {"num_attention_heads", 16},
                           {"intermediate_size", 4096}, {"num_hidden_layers", 24}}},
      {"albert-xlarge-v2", {{"model_type", "albert"}, {"hidden_size", 2048}, {"num_attention_heads", 16},
                            {"intermediate_size", 8192}, {"num_hidden_layers", 24}}},
      {"albert-xxlarge-v2", {{"model_type", "albert"}}},
      // Google's T5 (ReLU, tied head) and T5 v1.1 / FLAN-T5 (gated GELU, untied head, no dropout change)
      {"t5-small", {{"model_type", "t5"}, {"d_model", 512}, {"d_ff", 2048}, {"d_kv", 64}, {"num_heads", 8}, {"num_layers", 6}}},
      {"t5-base", {{"model_type", "t5"}, {"d_model", 768}, {"d_ff", 3072}, {"d_kv", 64}, {"num_heads", 12}, {"num_layers", 12}}},
      {"t5-large", {{"model_type", "t5"}, {"d_model", 1024}, {"d_ff", 4096}, {"d_kv", 64}, {"num_heads", 16}, {"num_layers", 24}}},
      {"t5-3b", {{"model_type", "t5"}, {"d_model", 1024}, {"d_ff", 16384}, {"d_kv", 128}, {"num_heads", 32}, {"num_layers", 24}}},
      {"t5-11b", {{"model_type", "t5"}, {"d_model", 1024}, {"d_ff", 65536}, {"d_kv", 128}, {"num_heads", 128}, {"num_layers", 24}}},
      {"t5-v1_1-small", {{"model_type", "t5"}, {"d_model", 512}, {"d_ff", 1024}, {"d_kv", 64}, {"num_heads", 6}, {"num_layers", 8}, {"feed_forward_proj", "gated-gelu"}, {"tie_word_embeddings", false}}},
      {"flan-t5-small", {{"model_type", "t5"}, {"d_model", 512}, {"d_ff", 1024}, {"d_kv", 64}, {"num_heads", 6}, {"num_layers", 8}, {"feed_forward_proj", "gated-gelu"}, {"tie_word_embeddings", false}}},
      {"t5-v1_1-base", {{"model_type", "t5"}, {"d_model", 768}, {"d_ff", 2048}, {"d_kv", 64}, {"num_heads", 12}, {"num_layers", 12}, {"feed_forward_proj", "gated-gelu"}, {"tie_word_embeddings", false}}},
      {"flan-t5-base", {{"model_type", "t5"}, {"d_model", 768}, {"d_ff", 2048}, {"d_kv", 64}, {"num_heads", 12}, {"num_layers", 12}, {"feed_forward_proj", "gated-gelu"}, {"tie_word_embeddings", false}}},
      {"t5-v1_1-large", {{"model_type", "t5"}, {"d_model", 1024}, {"d_ff", 2816}, {"d_kv", 64}, {"num_heads", 16}, {"num_layers", 24}, {"feed_forward_proj", "gated-gelu"}, {"tie_word_embeddings", false}}},
      {"flan-t5-large", {{"model_type", "t5"}, {"d_model", 1024}, {"d_ff", 2816}, {"d_kv", 64}, {"num_heads", 16}, {"num_layers", 24}, {"feed_forward_proj", "gated-gelu"}, {"tie_word_embeddings", false}}},
      {"t5-v1_1-xl", {{"model_type", "t5"}, {"d_model", 2048}, {"d_ff", 5120}, {"d_kv", 64}, {"num_heads", 32}, {"num_layers", 24}, {"feed_forward_proj", "gated-gelu"}, {"tie_word_embeddings", false}}},
      {"flan-t5-xl", {{"model_type", "t5"}, {"d_model", 2048}, {"d_ff", 5120}, {"d_kv", 64}, {"num_heads", 32}, {"num_layers", 24}, {"feed_forward_proj", "gated-gelu"}, {"tie_word_embeddings", false}}},
      {"t5-v1_1-xxl", {{"model_type", "t5"}, {"d_model", 4096}, {"d_ff", 10240}, {"d_kv", 64}, {"num_heads", 64}, {"num_layers", 24}, {"feed_forward_proj", "gated-gelu"}, {"tie_word_embeddings", false}}},
      {"flan-t5-xxl", {{"model_type", "t5"}, {"d_model", 4096}, {"d_ff", 10240}, {"d_kv", 64}, {"num_heads", 64}, {"num_layers", 24}, {"feed_forward_proj", "gated-gelu"}, {"tie_word_embeddings", false}}},
      {"gpt2", {{"model_type", "gpt2"}}},
      {"gpt2-medium",
       {{"model_type", "gpt2"}, {"n_embd", 1024}, {"n_layer", 24}, {"n_head", 16}}},
      {"gpt2-large",
       {{"model_type", "gpt2"}, {"n_embd", 1280}, {"n_layer", 36}, {"n_head", 20}}},
      // GPT-3-style models as Alpa's evaluation sizes them (GPT-2's architecture, 51,200 tokens)
      {"gpt3-1.3b", {{"model_type", "gpt2"}, {"n_embd", 2048}, {"n_layer", 24}, {"n_head", 32},
                     {"vocab_size", 51200}, {"n_positions", 2048}}},
      {"gpt3-2.6b", {{"model_type", "gpt2"}, {"n_embd", 2560}, {"n_layer", 32}, {"n_head", 32},
                     {"vocab_size", 51200}, {"n_positions", 2048}}},
      {"gpt3-6.7b", {{"model_type", "gpt2"}, {"n_embd", 4096}, {"n_layer", 32}, {"n_head", 32},
                     {"vocab_size", 51200}, {"n_positions", 2048}}},
      {"gpt3-15b", {{"model_type", "gpt2"}, {"n_embd", 5120}, {"n_layer", 48}, {"n_head", 40},
                    {"vocab_size", 51200}, {"n_positions", 2048}}},
      {"gpt3-39b", {{"model_type", "gpt2"}, {"n_embd", 8192}, {"n_layer", 48}, {"n_head", 64},
                    {"vocab_size", 51200}, {"n_positions", 2048}}},
      {"gpt3-175b", {{"model_type", "gpt2"}, {"n_embd", 12288}, {"n_layer", 96}, {"n_head", 96},
                     {"vocab_size", 51200}, {"n_positions", 2048}}},
      {"TinyLlama-1.1B",
       {{"model_type", "llama"}, {"hidden_size", 2048}, {"intermediate_size", 5632},
        {"num_hidden_layers", 22}, {"num_attention_heads", 32}, {"num_key_value_heads", 4},
        {"max_position_embeddings", 2048}, {"rms_norm_eps", 1e-5}, {"vocab_size", 32000}}},
      {"llama-7b",
       {{"model_type", "llama"}, {"hidden_size", 4096}, {"intermediate_size", 11008},
        {"num_hidden_layers", 32}, {"num_attention_heads", 32}, {"rms_norm_eps", 1e-6}}},
      {"Qwen2-0.5B",
       {{"model_type", "qwen2"}, {"hidden_size", 896}, {"intermediate_size", 4864}, {"num_hidden_layers", 24},
        {"num_attention_heads", 14}, {"num_key_value_heads", 2}, {"max_position_embeddings", 131072},
        {"rope_theta", 1000000.0}, {"tie_word_embeddings", true}, {"sliding_window", 131072},
        {"max_window_layers", 24}, {"bos_token_id", 151643}, {"eos_token_id", 151643}}},
      {"Qwen2-1.5B",
       {{"model_type", "qwen2"}, {"hidden_size", 1536}, {"intermediate_size", 8960}, {"num_hidden_layers", 28},
        {"num_attention_heads", 12}, {"num_key_value_heads", 2}, {"max_position_embeddings", 131072},
        {"rope_theta", 1000000.0}, {"tie_word_embeddings", true}, {"sliding_window", 131072},
        {"max_window_layers", 28}, {"bos_token_id", 151643}, {"eos_token_id", 151643}}},
      {"Mistral-7B-v0.1",
       {{"model_type", "mistral"}, {"max_position_embeddings", 32768}, {"rms_norm_eps", 1e-5},
        {"sliding_window", 4096}, {"bos_token_id", 1}, {"eos_token_id", 2}}},
      // Mistral AI's mixtures of experts, as their config.json say
      {"Mixtral-8x7B-v0.1",
       {{"model_type", "mixtral"}, {"max_position_embeddings", 32768}, {"bos_token_id", 1}, {"eos_token_id", 2}}},
      {"Mixtral-8x22B-v0.1",
       {{"model_type", "mixtral"}, {"hidden_size", 6144}, {"intermediate_size", 16384}, {"num_hidden_layers", 56},
        {"num_attention_heads", 48}, {"vocab_size", 32768}, {"max_position_embeddings", 65536},
        {"bos_token_id", 1}, {"eos_token_id", 2}}},
      // EleutherAI's GPT-Neo (local layers see 256 positions) and Meta's OPT, as their config.json say
      {"gpt-neo-125M",
       {{"model_type", "gpt_neo"}, {"hidden_size", 768}, {"num_layers", 12}, {"num_heads", 12},
        {"attention_types", json::array({json::array({json::array({"global", "local"}), 6})})}}},
      {"gpt-neo-1.3B",
       {{"model_type", "gpt_neo"}, {"hidden_size", 2048}, {"num_layers", 24}, {"num_heads", 16},
        {"attention_types", json::array({json::array({json::array({"global", "local"}), 12})})}}},
      {"gpt-neo-2.7B",
       {{"model_type", "gpt_neo"}, {"hidden_size", 2560}, {"num_layers", 32}, {"num_heads", 20},
        {"attention_types", json::array({json::array({json::array({"global", "local"}), 16})})}}},
      {"opt-125m", {{"model_type", "opt"}, {"hidden_size", 768}, {"num_hidden_layers", 12}, {"num_attention_heads", 12},
               {"ffn_dim", 3072}}},
      {"opt-350m", {{"model_type", "opt"}, {"hidden_size", 1024}, {"num_hidden_layers", 24}, {"num_attention_heads", 16},
               {"ffn_dim", 4096},
               {"word_embed_proj_dim", 512}, {"do_layer_norm_before", false}}},
      {"opt-1.3b", {{"model_type", "opt"}, {"hidden_size", 2048}, {"num_hidden_layers", 24}, {"num_attention_heads", 32},
               {"ffn_dim", 8192}}},
      {"opt-2.7b", {{"model_type", "opt"}, {"hidden_size", 2560}, {"num_hidden_layers", 32}, {"num_attention_heads", 32},
               {"ffn_dim", 10240}}},
      {"opt-6.7b", {{"model_type", "opt"}, {"hidden_size", 4096}, {"num_hidden_layers", 32}, {"num_attention_heads", 32},
               {"ffn_dim", 16384}}},
      {"opt-13b", {{"model_type", "opt"}, {"hidden_size", 5120}, {"num_hidden_layers", 40}, {"num_attention_heads", 40},
               {"ffn_dim", 20480}}},
      {"opt-30b", {{"model_type", "opt"}, {"hidden_size", 7168}, {"num_hidden_layers", 48}, {"num_attention_heads", 56},
               {"ffn_dim", 28672}}},
      {"opt-66b", {{"model_type", "opt"}, {"hidden_size", 9216}, {"num_hidden_layers", 64}, {"num_attention_heads", 72},
               {"ffn_dim", 36864}}},
  };
  return table;
}

}  // namespace

ModelConfig ModelConfig::preset(const std::string& name) {
  for (auto& [preset_name, fields] : presets())
    if (preset_name == name) return ModelConfig(fields).with_defaults(fields["model_type"]);
  auto names = preset_names();
  auto close = closest_names(name, names);
  throw Error(fmt::format("models: unknown preset '{}'{} (presets: {})", name,
                          close.empty() ? "" : fmt::format(", did you mean '{}'?", close[0]),
                          join_or_none(names)));
}

std::vector<std::string> ModelConfig::preset_names() {
  std::vector<std::string> names;
  for (auto& p : presets()) names.push_back(p.first);
  return names;
}

ModelConfig ModelConfig::with_defaults(const std::string& model_type) const {
  nlohmann::json merged = class_defaults(model_type);
  for (auto& [key, value] : fields_.items()) merged[key] = value;
  merged["model_type"] = model_type;
  return ModelConfig(merged);
}

std::optional<int64_t> ModelConfig::pad_token_id() const {
  if (!has("pad_token_id")) return std::nullopt;
  int64_t id = integer("pad_token_id");
  if (id < 0) return std::nullopt;
  return id;
}

int64_t ModelConfig::integer(const std::string& key) const {
  if (!has(key)) throw Error(fmt::format("config: missing field '{}'", key));
  // floats only where integral and within int64's exact range (a cast of 1e300 is undefined)
  const auto& v = fields_[key];
  if (!v.is_number_integer() &&
      !(v.is_number() && v.get<double>() == std::floor(v.get<double>()) && std::fabs(v.get<double>()) < 9.0e15))
    throw Error(fmt::format("config: field '{}' must be an integer, got {}", key, v.dump()));
  return fields_[key].get<int64_t>();
}

int64_t ModelConfig::integer(const std::string& key, int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

double ModelConfig::number(const std::string& key, double fallback) const {
  if (!has(key)) return fallback;
  if (!fields_[key].is_number())
    throw Error(fmt::format("config: field '{}' must be a number, got {}", key, fields_[key].dump()));
  return fields_[key].get<double>();
}

bool ModelConfig::flag(const std::string& key, bool fallback) const {
  if (!has(key)) return fallback;
  if (!fields_[key].is_boolean())
    throw Error(fmt::format("config: field '{}' must be true or false, got {}", key, fields_[key].dump()));
  return fields_[key].get<bool>();
}

std::string ModelConfig::str(const std::string& key, const std::string& fallback) const {
  if (!has(key)) return fallback;
  if (!fields_[key].is_string())
    throw Error(fmt::format("config: field '{}' must be a string, got {}", key, fields_[key].dump()));
  return fields_[key].get<std::string>();
}

void throw_unknown_model_type(const std::string& model_type, const char* who) {
  const char* choices = "bert, roberta, albert, t5, gpt2, gpt_neo, opt, llama, qwen2, mistral, mixtral, mlp";
  if (model_type.empty())
    throw Error(fmt::format("{}: model_type is missing: name one of {} (or build with slapo.models.gpt2{{...}} and "
                            "its siblings)", who, choices));
  throw Error(fmt::format("{}: unknown model_type '{}' (choices: {})", who, model_type, choices));
}

}  // namespace slapo
