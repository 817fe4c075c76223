// Reading a tokenizer's JSON files (tokenizer.json, tokenizer_config.json, encoder.json): the file,
// a required field, a config's special token; each error names the file and what is missing.
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

namespace slapo::text {

/// The bytes of `path`; raises naming it when it cannot be opened.
std::string read_file(const std::string& path);
/// `path` parsed as JSON; raises naming the file and the kinds of tokenizer files read.
nlohmann::json parse_json_file(const std::string& path);
/// j[key]; raises "tokenizer: <where> has no "<key>"".
const nlohmann::json& field(const nlohmann::json& j, const char* key, const std::string& where);
/// A special token's text in tokenizer_config.json: "<s>" or {"content": "<s>", ...}; none when absent.
std::optional<std::string> config_token(const nlohmann::json& config, const char* key);

}  // namespace slapo::text
