// A Hugging Face tokenizer.json read as its pipeline: added tokens split out, the normalizer, the
// pre-tokenizer, the model (WordPiece, or BPE over characters), the post-processor's special tokens around the text; the
// decoder back. Each stage as Hugging Face's tokenizers (Rust) defines it; what is not read is
// refused by name. Byte-level BPE files take their own faster path (text/byte_level_bpe.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "text/added_tokens.h"
#include "text/decoders.h"
#include "text/normalizers.h"
#include "text/post_processor.h"
#include "text/pre_tokenizers.h"
#include "text/tokenizer.h"
#include "text/subword_model.h"

namespace slapo::text {

class PipelineTokenizer : public Tokenizer {
 public:
  /// Reads tokenizer.json at `path` (model WordPiece, or BPE that is not byte-level); tokenizer_config.json beside it names bos
  /// and eos when it has them, the post-processor's first and last tokens do otherwise.
  static std::shared_ptr<PipelineTokenizer> load(const std::string& path);
  /// The same, from the file's parsed JSON (`path` names it in errors and finds tokenizer_config.json).
  static std::shared_ptr<PipelineTokenizer> from_tokenizer_json(const nlohmann::json& j, const std::string& path);

  std::vector<int64_t> encode(const std::string& text) const override;
  IdsAndTypes encode_pair(const std::string& first, const std::string& second) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return static_cast<int64_t>(tokens_.size()); }
  std::optional<int64_t> token_id(const std::string& token) const override;
  std::optional<int64_t> bos_id() const override { return bos_; }
  std::optional<int64_t> eos_id() const override { return eos_; }

 private:
  PipelineTokenizer() = default;
  /// The ids of text between raw-matched added tokens: normalized, normalized added tokens split
  /// out, the rest pre-tokenized and tokenized by the model. `at_start`: the segment begins the text
  /// (Metaspace's prepend_scheme "first" adds its "▁" there only).
  void encode_segment(const std::string& text, bool at_start, std::vector<int64_t>& out) const;
  /// The ids of `text` without the post-processor's tokens, appended to `out`.
  void encode_text(const std::string& text, std::vector<int64_t>& out) const;

  std::unique_ptr<SubwordModel> model_;
  Normalizer normalizer_;
  PreTokenizer pre_tokenizer_;
  Decoder decoder_;
  PostProcessor post_;
  AddedTokens raw_added_, normalized_added_;
  std::unordered_map<std::string, int64_t> added_ids_;
  std::vector<std::string> tokens_;        // id -> its token, as decode's chain takes it (Decoder::token_form)
  std::vector<std::string> first_tokens_;  // the same for a text's first token
  std::optional<int64_t> bos_, eos_;
};

}  // namespace slapo::text
