// tokenizer.json's Replace, which is both a normalizer and a decoder: every occurrence of a string
// pattern replaced by `content`. A Regex pattern is refused by name.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace slapo::text {

struct Replacement {
  std::string from, to;
  /// `text` with every occurrence of `from` replaced by `to`, left to right.
  std::string apply(std::string text) const;
};

/// Reads {"type": "Replace", "pattern": {"String": ...}, "content": ...}; `stage` ("normalizer",
/// "decoder") and `where` name it in errors.
Replacement read_replace(const nlohmann::json& spec, const std::string& where, const char* stage);

}  // namespace slapo::text
