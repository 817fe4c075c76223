// tokenizer.json's BPE model over characters (SentencePiece-style: LLaMA-2, Mistral, Gemma): a word
// starts as its characters (with continuing_subword_prefix and end_of_word_suffix where the file has
// them), a character outside the vocabulary as its bytes' <0xXX> tokens (byte_fallback) or the
// unknown token (runs of them fused with fuse_unk), then the merges apply, lowest rank first and
// leftmost among equals, as Hugging Face's tokenizers (Rust) merges. Byte-level BPE files take
// text/byte_level_bpe.h.
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/subword_model.h"

namespace slapo::text {

class BpeModel : public SubwordModel {
 public:
  /// Reads model {"type": "BPE", "vocab", "merges", "unk_token", "byte_fallback", "fuse_unk",
  /// "ignore_merges", "continuing_subword_prefix", "end_of_word_suffix"}; raises naming `where`.
  BpeModel(const nlohmann::json& model, const std::string& where);

  void tokenize(const std::string& word, std::vector<int64_t>& out) const override;
  const std::unordered_map<std::string, int64_t>& vocab() const override { return vocab_; }

 private:
  struct Merge {
    int32_t rank;
    int64_t id;  // the merged token's
  };
  /// The word's ids after every merge (uncached).
  std::vector<int64_t> merge_word(const std::string& word) const;
  /// merge_word through the cache, for words under 256 bytes.
  void merge_cached(const std::string& word, std::vector<int64_t>& out) const;
  /// Where a word may be cut before a "▁" without changing its ids (see the constructor).
  bool can_cut_before_marker(const std::string& word, size_t at) const;

  std::unordered_map<std::string, int64_t> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;  // (left id << 32 | right id) -> rank and result
  std::optional<int64_t> unk_;
  bool byte_fallback_ = false, fuse_unk_ = false, ignore_merges_ = false;
  std::string prefix_, suffix_;
  int64_t byte_ids_[256];
  bool cut_at_markers_ = false;                // words split before "▁" into pieces merged apart
  std::unordered_map<std::string, bool> glue_;  // characters some token holds right before a "▁"  // <0xXX>'s id, -1 when the vocabulary lacks it
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache_;  // words under 256 bytes
};

}  // namespace slapo::text
