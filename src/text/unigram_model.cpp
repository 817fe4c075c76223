// Unigram segmentation as Hugging Face's tokenizers (Rust) runs it (models/unigram/model.rs:
// encode_optimized, after SentencePiece's unigram_model.cc).
#include "text/unigram_model.h"

#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include "core/error.h"
#include "text/json_fields.h"
#include "text/unicode_text.h"

namespace slapo::text {

namespace {

constexpr double kUnknownPenalty = 10.0;  // below the lowest piece's score

}  // namespace

UnigramModel::UnigramModel(const nlohmann::json& model, const std::string& where) : where_(where) {
  const auto& vocab = field(model, "vocab", where + "'s model");
  if (!vocab.is_array() || vocab.empty())
    throw Error(fmt::format("tokenizer: {}: a Unigram model.vocab is a list of [piece, score]", where));
  pieces_.reserve(vocab.size());
  double lowest = std::numeric_limits<double>::infinity();
  for (auto& entry : vocab) {
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number())
      throw Error(fmt::format("tokenizer: {}: Unigram piece {} is not [piece, score]: {}", where, pieces_.size(),
                              entry.dump().substr(0, 80)));
    const auto id = static_cast<int64_t>(pieces_.size());
    pieces_.push_back(entry[0].get<std::string>());
    scores_.push_back(entry[1].get<double>());
    vocab_.emplace(pieces_.back(), id);  // a repeated piece keeps its first id
    lowest = std::min(lowest, scores_.back());
  }
  unk_score_ = lowest - kUnknownPenalty;
  for (size_t id = 0; id < pieces_.size(); ++id) {
    const std::string_view piece = pieces_[id];
    for (size_t length = 1; length < piece.size(); ++length) prefixes_.emplace(piece.substr(0, length), -1);
    auto [at, added] = prefixes_.emplace(piece, static_cast<int64_t>(id));
    if (!added && at->second < 0) at->second = static_cast<int64_t>(id);
  }
  if (model.contains("unk_id") && !model["unk_id"].is_null()) {
    const auto& unk = model["unk_id"];
    if (!unk.is_number_integer() || unk.get<int64_t>() < 0 || unk.get<int64_t>() >= static_cast<int64_t>(pieces_.size()))
      throw Error(fmt::format("tokenizer: {}: Unigram unk_id {} is not a piece of its {} (0 .. {})", where, unk.dump(),
                              pieces_.size(), pieces_.size() - 1));
    unk_ = unk.get<int64_t>();
  }
  byte_fallback_ = model.value("byte_fallback", false);
}

std::vector<std::string> UnigramModel::segment(const std::string& word) const {
  struct Best {
    int64_t id = -1;
    double score = 0;
    std::optional<size_t> from;
  };
  const size_t size = word.size();
  std::vector<Best> best(size + 1);
  best[0].from = 0;
  for (size_t start = 0; start < size;) {
    const double here = best[start].score;
    const size_t char_length = std::min(unicode::utf8_length(static_cast<unsigned char>(word[start])), size - start);
    bool single = false;  // a piece that is this one character
    const std::string_view rest(word.data() + start, size - start);
    for (size_t length = 1; length <= rest.size(); ++length) {
      auto found = prefixes_.find(rest.substr(0, length));
      if (found == prefixes_.end()) break;
      if (found->second < 0) continue;
      Best& target = best[start + length];
      const double score = here + scores_[static_cast<size_t>(found->second)];
      if (!target.from || score > target.score) target = {found->second, score, start};
      single = single || length == char_length;
    }
    if (!single) {
      if (!unk_)
        throw Error(fmt::format("tokenizer: {}: Unigram has no unk_id, and no piece covers '{}'", where_,
                                word.substr(start, char_length)));
      Best& target = best[start + char_length];
      const double score = here + unk_score_;
      if (!target.from || score > target.score) target = {*unk_, score, start};
    }
    start += char_length;
  }
  std::vector<std::string> pieces;
  std::string unknown;  // a run of unknown pieces, fused (back to front)
  for (size_t end = size; end > 0;) {
    const Best& node = best[end];
    const size_t from = *node.from;
    if (unk_ && node.id == *unk_) {
      unknown.insert(0, word, from, end - from);
    } else {
      if (!unknown.empty()) pieces.push_back(std::move(unknown)), unknown.clear();
      pieces.push_back(word.substr(from, end - from));
    }
    end = from;
  }
  if (!unknown.empty()) pieces.push_back(std::move(unknown));
  std::reverse(pieces.begin(), pieces.end());
  return pieces;
}

void UnigramModel::ids_of(const std::string& word, std::vector<int64_t>& out) const {
  for (auto& piece : segment(word)) {
    if (auto found = vocab_.find(piece); found != vocab_.end()) {
      out.push_back(found->second);
      continue;
    }
    if (byte_fallback_) {  // every byte has its <0xXX>, or the unknown token
      std::vector<int64_t> bytes;
      for (unsigned char b : piece) {
        auto found = vocab_.find(fmt::format("<0x{:02X}>", b));
        if (found == vocab_.end()) break;
        bytes.push_back(found->second);
      }
      if (bytes.size() == piece.size()) {
        out.insert(out.end(), bytes.begin(), bytes.end());
        continue;
      }
    }
    if (!unk_) throw Error(fmt::format("tokenizer: {}: Unigram has no unk_id for '{}'", where_, piece));
    out.push_back(*unk_);
  }
}

void UnigramModel::tokenize(const std::string& word, std::vector<int64_t>& out) const {
  if (word.empty()) return;
  if (word.size() >= 256) return ids_of(word, out);
  std::lock_guard<std::mutex> lock(cache_mutex_);
  auto cached = cache_.find(word);
  if (cached == cache_.end()) {
    std::vector<int64_t> ids;
    ids_of(word, ids);
    cached = cache_.emplace(word, std::move(ids)).first;
  }
  out.insert(out.end(), cached->second.begin(), cached->second.end());
}

}  // namespace slapo::text
