// A checkpoint's tokenizer, whichever file it ships: a Hugging Face tokenizer.json (byte-level BPE,
// text/byte_level_bpe.h), GPT-2's encoder.json + vocab.bpe, or SentencePiece's tokenizer.model
// (text/sentencepiece_model.h). slapo.tokenizer and `slapo-lua tokenize` take any of them.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "text/post_processor.h"

namespace slapo::text {

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;
  /// The ids of `text`, with the tokens the checkpoint's tokenizer puts around a text by default
  /// (a post-processor's, or SentencePiece's BOS when the config asks for it).
  virtual std::vector<int64_t> encode(const std::string& text) const = 0;
  /// The ids of a pair of texts as the post-processor's pair template lays them out (BERT's
  /// [CLS] first [SEP] second [SEP]), with each id's type id; raises naming what has none.
  virtual IdsAndTypes encode_pair(const std::string& first, const std::string& second) const;
  /// The text of `ids`; raises naming an id outside the vocabulary.
  virtual std::string decode(const std::vector<int64_t>& ids) const = 0;
  virtual int64_t vocab_size() const = 0;
  /// A token's id, none when the vocabulary lacks it.
  virtual std::optional<int64_t> token_id(const std::string& token) const = 0;
  /// The beginning- and end-of-text tokens; none when the tokenizer has none.
  virtual std::optional<int64_t> bos_id() const = 0;
  virtual std::optional<int64_t> eos_id() const = 0;
};

/// The tokenizer at `path`: a tokenizer.json or tokenizer.model file, or a checkpoint directory
/// holding one (tokenizer.json first, as transformers' fast tokenizers), or GPT-2's encoder.json
/// and vocab.bpe; raises naming the path and the kinds read.
std::shared_ptr<Tokenizer> open_tokenizer(const std::string& path);

}  // namespace slapo::text
