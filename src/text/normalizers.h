// tokenizer.json's normalizer: what runs on the text between added tokens before pre-tokenizing.
// Read: BertNormalizer, Lowercase, NFC, NFD, NFKC, NFKD, StripAccents, Strip, Prepend, Replace (a
// string or a regex), Precompiled (SentencePiece's character map), Sequence; anything else is
// refused by name.
#pragma once

#include <functional>
#include <string>

#include <nlohmann/json.hpp>

namespace slapo::text {

using Normalizer = std::function<std::string(const std::string&)>;

/// The normalizer `spec` describes (null: none, the identity); `where` names the file in errors.
Normalizer make_normalizer(const nlohmann::json& spec, const std::string& where);

}  // namespace slapo::text
