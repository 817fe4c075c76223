// tokenizer.json's Replace, which is both a normalizer and a decoder: every occurrence of a string
// pattern, or every match of a Regex one, replaced by `content` (taken as it is, no group references).
#pragma once

#include <memory>
#include <string>

#include <nlohmann/json.hpp>

#include "text/regex_pattern.h"

namespace slapo::text {

struct Replacement {
  std::string from, to;
  std::shared_ptr<const Regex> regex;  // set: matches of it are replaced, not `from`
  /// `text` with every occurrence of `from` (every match of `regex`) replaced by `to`, left to right.
  std::string apply(std::string text) const;
};

/// Reads {"type": "Replace", "pattern": {"String" or "Regex": ...}, "content": ...}; `stage` ("normalizer",
/// "decoder") and `where` name it in errors.
Replacement read_replace(const nlohmann::json& spec, const std::string& where, const char* stage);

}  // namespace slapo::text
