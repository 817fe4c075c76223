// tokenizer.json's decoder: tokens back to text. Read: WordPiece, none (tokens joined by spaces);
// anything else is refused by name.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace slapo::text {

using Decoder = std::function<std::string(const std::vector<std::string>& tokens)>;

/// The decoder `spec` describes; `where` names the file in errors.
Decoder make_decoder(const nlohmann::json& spec, const std::string& where);

}  // namespace slapo::text
