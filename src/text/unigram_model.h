// tokenizer.json's Unigram model (T5, ALBERT, XLM-R, as transformers converts their SentencePiece
// models): the segmentation of a word whose pieces' scores sum highest (Viterbi over every vocabulary
// piece that starts at each character), a character no piece covers as the unknown token (runs of
// them fused into one), a piece outside the vocabulary as its bytes' <0xXX> with byte_fallback, as
// Hugging Face's tokenizers (Rust) segments.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/subword_model.h"

namespace slapo::text {

class UnigramModel : public SubwordModel {
 public:
  /// Reads model {"type": "Unigram", "vocab": [[piece, score], ...], "unk_id", "byte_fallback"};
  /// raises naming `where`.
  UnigramModel(const nlohmann::json& model, const std::string& where);

  void tokenize(const std::string& word, std::vector<int64_t>& out) const override;
  const std::unordered_map<std::string, int64_t>& vocab() const override { return vocab_; }

 private:
  /// The best segmentation's pieces (unknown runs fused), uncached.
  std::vector<std::string> segment(const std::string& word) const;
  void ids_of(const std::string& word, std::vector<int64_t>& out) const;

  std::unordered_map<std::string, int64_t> vocab_;
  std::vector<double> scores_;
  std::vector<std::string> pieces_;                     // the storage prefixes_ views
  std::unordered_map<std::string_view, int64_t> prefixes_;  // every prefix of a piece -> its id, or -1
  std::string where_;  // the file, for errors while encoding
  std::optional<int64_t> unk_;
  double unk_score_ = 0;
  bool byte_fallback_ = false;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache_;  // words under 256 bytes
};

}  // namespace slapo::text
