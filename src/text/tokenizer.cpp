// Which tokenizer file a path names, and the reader for it.
#include "text/tokenizer.h"

#include <filesystem>

#include "core/error.h"
#include "text/byte_level_bpe.h"
#include "text/sentencepiece_model.h"

namespace slapo::text {

std::shared_ptr<Tokenizer> open_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_regular_file(path)) {
    if (fs::path(path).extension() == ".model") return SentencePieceModel::load(path);
    return ByteLevelBpe::load_tokenizer_json(path);
  }
  if (!fs::is_directory(path))
    throw Error(fmt::format("tokenizer: {} does not exist; give a tokenizer.json or tokenizer.model, or the directory "
                            "of a checkpoint that holds one (or GPT-2's encoder.json and vocab.bpe, e.g. "
                            "data/gpt2-bpe from scripts/fetch-data)", path));
  const fs::path dir(path);
  if (fs::exists(dir / "tokenizer.json")) return ByteLevelBpe::load_tokenizer_json((dir / "tokenizer.json").string());
  if (fs::exists(dir / "tokenizer.model")) return SentencePieceModel::load((dir / "tokenizer.model").string());
  if (fs::exists(dir / "encoder.json") && fs::exists(dir / "vocab.bpe")) return ByteLevelBpe::load(path);
  throw Error(fmt::format("tokenizer: {} holds no tokenizer file (read: tokenizer.json of a byte-level BPE such as "
                          "LLaMA-3's or GPT-2's, SentencePiece's tokenizer.model, or GPT-2's encoder.json and "
                          "vocab.bpe)", path));
}

}  // namespace slapo::text
