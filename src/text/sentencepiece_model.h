// SentencePiece's tokenizer.model (LLaMA-1/2, Mistral, TinyLlama, T5, ALBERT), run by Debian's
// libsentencepiece: the library that wrote the file and that transformers' slow tokenizers call
// (tests/cli/test_sentencepiece.sh checks the ids against python3-sentencepiece). It is reached
// through a module of its own, text/sentencepiece_shim.h.
#pragma once

#include <memory>
#include <string>

#include "text/tokenizer.h"

namespace slapo::text {

class SentencePieceModel : public Tokenizer {
 public:
  /// Reads `path` (a tokenizer.model); tokenizer_config.json beside it says whether encode adds
  /// BOS and EOS (add_bos_token, add_eos_token), else LLaMA's choice: BOS when the model has one,
  /// no EOS. Raises naming the file when it is not a SentencePiece model.
  static std::shared_ptr<SentencePieceModel> load(const std::string& path);

  std::vector<int64_t> encode(const std::string& text) const override;
  std::string decode(const std::vector<int64_t>& ids) const override;
  int64_t vocab_size() const override { return vocab_size_; }
  std::optional<int64_t> token_id(const std::string& token) const override;
  std::optional<int64_t> bos_id() const override { return bos_; }
  std::optional<int64_t> eos_id() const override { return eos_; }

  ~SentencePieceModel() override;

 private:
  SentencePieceModel() = default;
  void* sp_ = nullptr;  // the module's processor
  std::string path_;
  int64_t vocab_size_ = 0;
  std::optional<int64_t> bos_, eos_;
  bool add_bos_ = true, add_eos_ = false;
};

}  // namespace slapo::text
