// Byte-level BPE: GPT-2's as GPT-2 published it (encoder.json + vocab.bpe), or a Hugging Face
// tokenizer.json of that model type (LLaMA-3, Qwen2/Qwen3 with their NFC normalizer, GPT-2). Added tokens are split out first, then
// the pre-tokenizer's pattern runs through PCRE2 with Unicode properties, then the merges apply by
// rank within each piece. No Lua. Ids match the reference implementations exactly (gpt-3-encoder;
// Hugging Face's Tokenizers.js on tokenizer.json): tests/cli/test_tokenizer.sh.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/added_tokens.h"
#include "text/normalizers.h"
#include "text/regex_pattern.h"
#include "text/tokenizer.h"

namespace slapo::text {

class ByteLevelBpe : public Tokenizer {
 public:
  /// Reads `dir`/encoder.json and `dir`/vocab.bpe; raises naming the file and what is wrong.
  static std::shared_ptr<ByteLevelBpe> load(const std::string& dir);
  /// Reads a Hugging Face tokenizer.json whose model is byte-level BPE; raises naming the file, the
  /// field and the kinds it reads when it is another.
  static std::shared_ptr<ByteLevelBpe> load_tokenizer_json(const std::string& path);
  /// The same, from the file's parsed JSON (`path` names it in errors).
  static std::shared_ptr<ByteLevelBpe> from_tokenizer_json(const nlohmann::json& j, const std::string& path);
  /// Whether this build has the pre-tokenizer's regex engine (PCRE2; -DSLAPO_PCRE2=OFF builds do not).
  static bool available();

  /// The ids of `text`, with the post-processor's tokens around them (tokenizer.json's
  /// TemplateProcessing: LLaMA-3.1's BOS), as Hugging Face's encode does by default.
  std::vector<int64_t> encode(const std::string& text) const override;
  IdsAndTypes encode_pair(const std::string& first, const std::string& second) const override;
  /// The text of `ids`; raises naming an id outside the vocabulary.
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  /// A token's id ("<|endoftext|>"), none when the vocabulary lacks it.
  std::optional<int64_t> token_id(const std::string& token) const override;
  /// The beginning- and end-of-text tokens: tokenizer_config.json's bos_token / eos_token beside a
  /// tokenizer.json, GPT-2's <|endoftext|> for both otherwise; none when unknown.
  std::optional<int64_t> bos_id() const override { return bos_; }
  std::optional<int64_t> eos_id() const override { return eos_; }

  ~ByteLevelBpe() override;
  ByteLevelBpe(const ByteLevelBpe&) = delete;
  ByteLevelBpe& operator=(const ByteLevelBpe&) = delete;

 private:
  ByteLevelBpe() = default;
  /// The ids of one pre-tokenized piece (its bytes), merged by rank; cached.
  const std::vector<int64_t>& piece_ids(const std::string& piece) const;
  /// The ids of text with no added token in it: pre-tokenized, each piece merged.
  void encode_ordinary(const std::string& text, size_t begin, size_t end, std::vector<int64_t>& out) const;
  /// text[begin, end) split by the pre-tokenizer's patterns from `stage` on, each piece merged.
  /// `spaced`: the piece was given ByteLevel's prefix space already.
  void split_and_merge(const std::string& text, size_t begin, size_t end, size_t stage, std::vector<int64_t>& out,
                       bool spaced = false) const;
  /// encode_ordinary after the normalizer (Qwen's NFC), which runs on the text between added tokens.
  void encode_normalized(const std::string& text, size_t begin, size_t end, std::vector<int64_t>& out) const;
  /// The ids of `text` without the post-processor's tokens, appended to `out`.
  void encode_text(const std::string& text, std::vector<int64_t>& out) const;
  /// GPT-2's byte-to-character map, and `pattern` compiled as the pre-tokenizer.
  void map_bytes();
  /// A pre-tokenizer stage: split by `pattern`, keeping the text between matches or not.
  void add_split(const std::string& pattern, bool keep_between, const std::string& source);
  /// Each token's bytes (an added token's text), for decode; once the vocabulary is read.
  void index_token_bytes();

  std::unordered_map<std::string, int64_t> ids_;  // token (byte-mapped characters) -> id
  std::vector<std::string> tokens_;               // id -> token
  std::unordered_map<std::string, int> ranks_;    // "left right" -> merge rank
  bool ignore_merges_ = false;                    // a piece that is a token is that token, unmerged
  Normalizer normalizer_ = [](const std::string& text) { return text; };
  AddedTokens added_;                                     // added tokens (their text, not byte-mapped)
  std::unordered_map<int64_t, std::string> added_text_;  // id -> an added token's text, for decode
  PostProcessor post_;  // its tokens around a text, and a pair's template
  std::optional<int64_t> bos_, eos_;
  std::string byte_chars_[256];                   // each byte's printable stand-in (UTF-8)
  std::unordered_map<std::string, uint8_t> char_bytes_;
  std::vector<std::string> token_bytes_;  // id -> the bytes it decodes to
  std::vector<bool> byte_level_;          // id -> whether its characters all stand for bytes
  struct Stage {
    Regex regex;
    bool keep_between;  // Isolated: the text between matches is a piece too
  };
  std::vector<Stage> splits_;  // the pre-tokenizer's stages, in order
  bool add_prefix_space_ = false;  // ByteLevel's: a space before each piece that has none
  size_t prefix_stage_ = 0;        // the stage ByteLevel starts at (its regex's, or the merges')
  mutable std::mutex cache_mutex_;
  mutable std::unordered_map<std::string, std::vector<int64_t>> cache_;
};

}  // namespace slapo::text
