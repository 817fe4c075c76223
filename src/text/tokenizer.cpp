// Which tokenizer file a path names, and the reader for it.
#include "text/tokenizer.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <vector>

#include <fmt/ranges.h>

#include "core/error.h"
#include "text/byte_level_bpe.h"
#include "text/json_fields.h"
#include "text/pipeline_tokenizer.h"
#include "text/sentencepiece_model.h"

namespace slapo::text {

namespace {

const char* kFilesRead =
    "slapo-lua reads tokenizer.json (a byte-level BPE such as LLaMA-3's or GPT-2's, BPE over characters such as "
    "LLaMA-2's, or WordPiece such as BERT's), "
    "SentencePiece's tokenizer.model "
    "or spiece.model (any *.model file), or a directory holding one of them or GPT-2's encoder.json and vocab.bpe";

// The first character that is not white space, or '\0' for an empty file.
char first_character(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  char c = '\0';
  while (in.get(c))
    if (!std::isspace(static_cast<unsigned char>(c))) return c;
  return '\0';
}

// Whether a tokenizer.json is a byte-level BPE (GPT-2's scheme): its pre-tokenizer or decoder is
// ByteLevel, alone or in a Sequence
bool byte_level(const nlohmann::json& j) {
  auto is_byte_level = [](const nlohmann::json& stage, const char* list) {
    if (!stage.is_object()) return false;
    if (stage.value("type", "") == "ByteLevel") return true;
    if (stage.value("type", "") != "Sequence" || !stage.contains(list)) return false;
    for (auto& each : stage[list])
      if (each.is_object() && each.value("type", "") == "ByteLevel") return true;
    return false;
  };
  return (j.contains("pre_tokenizer") && is_byte_level(j["pre_tokenizer"], "pretokenizers")) ||
         (j.contains("decoder") && is_byte_level(j["decoder"], "decoders"));
}

// A tokenizer.json: a byte-level BPE its own fast way, any other through the pipeline of stages
std::shared_ptr<Tokenizer> load_tokenizer_json(const std::string& path) {
  const nlohmann::json j = parse_json_file(path);
  const bool bpe = j.is_object() && j.contains("model") && j["model"].is_object() && j["model"].value("type", "") == "BPE";
  if (bpe && byte_level(j)) return ByteLevelBpe::from_tokenizer_json(j, path);
  return PipelineTokenizer::from_tokenizer_json(j, path);
}

}  // namespace

IdsAndTypes Tokenizer::encode_pair(const std::string&, const std::string&) const {
  throw Error("tokenizer: a pair of texts is laid out by a tokenizer.json's post-processor (its pair template); this "
              "tokenizer has none (GPT-2's encoder.json, SentencePiece's tokenizer.model): encode each text");
}

std::shared_ptr<Tokenizer> open_tokenizer(const std::string& path) {
  namespace fs = std::filesystem;
  if (fs::is_regular_file(path)) {
    const auto extension = fs::path(path).extension();
    if (extension == ".model") return SentencePieceModel::load(path);
    if (extension == ".json" || first_character(path) == '{') return load_tokenizer_json(path);
    throw Error(fmt::format("tokenizer: {} is not a tokenizer file (neither JSON nor named *.model); {}", path,
                           kFilesRead));
  }
  if (!fs::is_directory(path))
    throw Error(fmt::format("tokenizer: {} does not exist; give a tokenizer.json or tokenizer.model, or the directory "
                            "of a checkpoint that holds one (or GPT-2's encoder.json and vocab.bpe, e.g. "
                            "data/gpt2-bpe from scripts/fetch-data)", path));
  const fs::path dir(path);
  if (fs::exists(dir / "tokenizer.json")) return load_tokenizer_json((dir / "tokenizer.json").string());
  // ALBERT's and T5's checkpoints name their SentencePiece model spiece.model
  for (const char* name : {"tokenizer.model", "spiece.model"})
    if (fs::exists(dir / name)) return SentencePieceModel::load((dir / name).string());
  if (fs::exists(dir / "encoder.json") && fs::exists(dir / "vocab.bpe")) return ByteLevelBpe::load(path);
  std::vector<std::string> models;
  for (auto& entry : fs::directory_iterator(dir))
    if (entry.is_regular_file() && entry.path().extension() == ".model") models.push_back(entry.path().string());
  std::sort(models.begin(), models.end());
  if (!models.empty())
    throw Error(fmt::format("tokenizer: {} holds no tokenizer.json, tokenizer.model or spiece.model, but {}: if it "
                            "is a SentencePiece model, give the file itself ({})",
                            path, fmt::join(models, ", "), models.front()));
  throw Error(fmt::format("tokenizer: {} holds no tokenizer file; {}", path, kFilesRead));
}

}  // namespace slapo::text
