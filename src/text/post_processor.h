// tokenizer.json's post_processor, for one text: the special tokens it puts before and after the
// text's ids. Read: TemplateProcessing (its single template), BertProcessing, RobertaProcessing,
// ByteLevel (adds none), Sequence of them; anything else is refused by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace slapo::text {

struct Surround {
  std::vector<int64_t> prefix, suffix;
};

/// The tokens `spec` puts around a single text (null: none); `where` names the file in errors.
Surround read_post_processor(const nlohmann::json& spec, const std::string& where);

}  // namespace slapo::text
