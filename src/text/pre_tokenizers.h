// tokenizer.json's pre-tokenizer: the normalized text split into the words a model tokenizes one
// at a time. Read: BertPreTokenizer, Whitespace, WhitespaceSplit, Split by a string or a regex
// (every behavior, invert), CharDelimiterSplit, Metaspace, Punctuation, Digits, Sequence of them;
// anything else is refused by name.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace slapo::text {

/// Appends the words of `text`; `at_start` says the text begins the whole input (not after an added
/// token), which Metaspace's prepend_scheme "first" asks.
using PreTokenizer = std::function<void(const std::string& text, bool at_start, std::vector<std::string>& words)>;

/// The pre-tokenizer `spec` describes (null: the whole text is one word); `where` names the file.
PreTokenizer make_pre_tokenizer(const nlohmann::json& spec, const std::string& where);

}  // namespace slapo::text
