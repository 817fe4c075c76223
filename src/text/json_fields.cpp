// Reading a tokenizer's JSON files, shared by every tokenizer.json model.
#include "text/json_fields.h"

#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"

namespace slapo::text {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("tokenizer: cannot open {}", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

nlohmann::json parse_json_file(const std::string& path) {
  try {
    return nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("tokenizer: {} is not JSON ({}); a tokenizer file is a tokenizer.json, SentencePiece's "
                            "tokenizer.model or spiece.model, or a directory holding one (or GPT-2's encoder.json "
                            "and vocab.bpe)", path, e.what()));
  }
}

const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& where) {
  if (!j.is_object() || !j.contains(key)) throw Error(fmt::format("tokenizer: {} has no \"{}\"", where, key));
  return j[key];
}

std::optional<std::string> config_token(const nlohmann::json& config, const char* key) {
  if (!config.contains(key)) return std::nullopt;
  const auto& v = config[key];
  if (v.is_string()) return v.get<std::string>();
  if (v.is_object() && v.contains("content") && v["content"].is_string()) return v["content"].get<std::string>();
  return std::nullopt;
}

}  // namespace slapo::text
