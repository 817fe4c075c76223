// GPT-2's byte-level BPE as GPT-2 published it (encoder.json + vocab.bpe): its pre-tokenizer
// pattern run by PCRE2 with Unicode properties, then the merges applied by rank within each piece.
// No Lua. Ids match the npm reference implementation (gpt-3-encoder) exactly: tests/cli/test_tokenizer.sh.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace slapo::text {

class ByteLevelBpe {
 public:
  /// Reads `dir`/encoder.json and `dir`/vocab.bpe; raises naming the file and what is wrong.
  static std::shared_ptr<ByteLevelBpe> load(const std::string& dir);
  /// Whether this build has the pre-tokenizer's regex engine (PCRE2; -DSLAPO_PCRE2=OFF builds do not).
  static bool available();

  std::vector<int64_t> encode(const std::string& text) const;
  /// The text of `ids`; raises naming an id outside the vocabulary.
  std::string decode(const std::vector<int64_t>& ids) const;
  int64_t vocab_size() const { return static_cast<int64_t>(tokens_.size()); }
  /// A token's id ("<|endoftext|>"), none when the vocabulary lacks it.
  std::optional<int64_t> token_id(const std::string& token) const;

  ~ByteLevelBpe();
  ByteLevelBpe(const ByteLevelBpe&) = delete;
  ByteLevelBpe& operator=(const ByteLevelBpe&) = delete;

 private:
  ByteLevelBpe() = default;
  /// The ids of one pre-tokenized piece (its bytes), merged by rank; cached.
  const std::vector<int64_t>& piece_ids(const std::string& piece) const;

  std::unordered_map<std::string, int64_t> ids_;  // token (byte-mapped characters) -> id
  std::vector<std::string> tokens_;               // id -> token
  std::unordered_map<std::string, int> ranks_;    // "left right" -> merge rank
  std::string byte_chars_[256];                   // each byte's printable stand-in (UTF-8)
  std::unordered_map<std::string, uint8_t> char_bytes_;
  struct Pattern;
  std::unique_ptr<Pattern> pattern_;
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache_;
};

}  // namespace slapo::text
