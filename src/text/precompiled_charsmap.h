// tokenizer.json's Precompiled normalizer: SentencePiece's character map (the normalization rules a
// spiece.model carries, NFKC and its own), as Hugging Face's tokenizers applies it. The map is a
// double-array trie over UTF-8 bytes whose leaves point into a blob of NUL-ended replacements.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace slapo::text {

class PrecompiledCharsmap {
 public:
  /// The map from its base64 text (tokenizer.json's "precompiled_charsmap"); `where` names the file
  /// in errors.
  static PrecompiledCharsmap from_base64(const std::string& encoded, const std::string& where);

  /// `text` normalized: each extended grapheme cluster shorter than 6 bytes that the map rewrites
  /// (the shortest rule that starts it) becomes its replacement whole; any other cluster, character
  /// by character. This is Hugging Face's reading (tokenizers' Precompiled), not SentencePiece's
  /// own longest-match one; the two differ only where a rule covers the start of a longer cluster.
  std::string normalize(const std::string& text) const;

 private:
  /// The replacement of the shortest rule that is a prefix of key[0, length), if one is.
  std::optional<std::string_view> shortest_rule(const char* key, size_t length) const;

  std::vector<uint32_t> trie_;  // the double array's units
  std::string replacements_;    // NUL-ended replacements the leaves point into
  std::optional<std::string> ascii_[128];  // each ASCII character's rule, looked up once
};

}  // namespace slapo::text
