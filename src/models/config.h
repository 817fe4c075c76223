// A model's Hugging Face config.json fields, with the defaults of the matching HF class.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace slapo {

class ModelConfig {
 public:
  ModelConfig() = default;
  explicit ModelConfig(nlohmann::json fields) : fields_(std::move(fields)) {}

  /// A named preset ("gpt2", "bert-base-uncased", ...). Throws with the list of names.
  static ModelConfig preset(const std::string& name);
  static std::vector<std::string> preset_names();

  /// Fills the defaults of `model_type`'s HF config class for absent fields.
  ModelConfig with_defaults(const std::string& model_type) const;

  std::string model_type() const { return str("model_type", ""); }
  int64_t integer(const std::string& key) const;
  int64_t integer(const std::string& key, int64_t fallback) const;
  double number(const std::string& key, double fallback) const;
  bool flag(const std::string& key, bool fallback) const;
  std::string str(const std::string& key, const std::string& fallback) const;
  bool has(const std::string& key) const { return fields_.contains(key) && !fields_[key].is_null(); }
  /// The padding row of the token embedding: none when pad_token_id is absent, null or negative
  /// (configs of the LLaMA-1 era write -1 for "no pad token", and transformers loads them so).
  std::optional<int64_t> pad_token_id() const;

  const nlohmann::json& json() const { return fields_; }

 private:
  nlohmann::json fields_ = nlohmann::json::object();
};

/// The error for a model_type the zoo does not build (or none), with the choices; `who` in front.
[[noreturn]] void throw_unknown_model_type(const std::string& model_type, const char* who);

}  // namespace slapo
