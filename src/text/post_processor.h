// tokenizer.json's post_processor: the special tokens it puts around one text, and the template of
// a pair of texts (the first's ids, the second's, special tokens, each part with its type id).
// Read: TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel (adds none), Sequence of
// them; anything else is refused by name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace slapo::text {

struct Surround {
  std::vector<int64_t> prefix, suffix;
};

/// A part of a pair's template: a special token's ids, or one of the texts' (`text` 0 or 1).
struct TemplatePart {
  int text = -1;  // -1: the special tokens `ids`
  std::vector<int64_t> ids;
  int64_t type_id = 0;
};

struct IdsAndTypes {
  std::vector<int64_t> ids, type_ids;
};

struct PostProcessor {
  Surround single;  // around one text
  std::vector<TemplatePart> pair{{0, {}, 0}, {1, {}, 1}};  // none: the texts one after the other
  std::string pair_refusal;  // set: why a pair cannot be encoded (two processors adding tokens)
  /// `first` and `second`'s ids (each without special tokens) as the pair template lays them out.
  IdsAndTypes apply_pair(const std::vector<int64_t>& first, const std::vector<int64_t>& second) const;
};

/// The post-processor `spec` describes (null: none); `where` names the file in errors.
PostProcessor read_post_processor(const nlohmann::json& spec, const std::string& where);

}  // namespace slapo::text
