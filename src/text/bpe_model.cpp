// Character-level BPE as Hugging Face's tokenizers (Rust) runs it (models/bpe/{model,word}.rs).
#include "text/bpe_model.h"

#include <queue>

#include <fmt/format.h>

#include "core/error.h"
#include "text/json_fields.h"
#include "text/unicode_text.h"

namespace slapo::text {

namespace {

uint64_t pair_key(int64_t left, int64_t right) {
  return (static_cast<uint64_t>(left) << 32) | static_cast<uint64_t>(right);
}

const std::string kMarker = "\xE2\x96\x81";  // SentencePiece's word start, "▁"

}  // namespace

BpeModel::BpeModel(const nlohmann::json& model, const std::string& where) {
  vocab_ = read_vocab(model, where);
  auto text_field = [&](const char* key) {
    return model.contains(key) && model[key].is_string() ? model[key].get<std::string>() : std::string();
  };
  prefix_ = text_field("continuing_subword_prefix");
  suffix_ = text_field("end_of_word_suffix");
  byte_fallback_ = model.value("byte_fallback", false);
  fuse_unk_ = model.value("fuse_unk", false);
  ignore_merges_ = model.value("ignore_merges", false);
  if (model.contains("dropout") && !model["dropout"].is_null() && model["dropout"].get<double>() > 0)
    throw Error(fmt::format("tokenizer: {}: BPE dropout {} is not read (encode is deterministic)", where,
                            model["dropout"].dump()));
  if (const std::string unk = text_field("unk_token"); !unk.empty()) {
    auto found = vocab_.find(unk);
    if (found == vocab_.end())
      throw Error(fmt::format("tokenizer: {}: BPE's unk_token '{}' is not in its vocabulary", where, unk));
    unk_ = found->second;
  }
  for (int b = 0; b < 256; ++b) {
    auto found = vocab_.find(fmt::format("<0x{:02X}>", b));
    byte_ids_[b] = found == vocab_.end() ? -1 : found->second;
  }
  // A file with no pre-tokenizer (LLaMA-2's) makes a whole text one word. Merging it in pieces cut
  // before each "▁" gives the same ids when no token spans such a cut: no token holds the character
  // before the cut followed by "▁" (symbols are tokens, and so is every merge's result). Checked over
  // the vocabulary here; a character some token glues to a following "▁" (Gemma's ">▁</") is never
  // cut after, nor, when that character is '>', one that falls back to <0xXX> or the unknown token.
  cut_at_markers_ = prefix_.empty() && suffix_.empty() && vocab_.count(kMarker);
  for (auto& [token, id] : vocab_)
    for (size_t at = token.find(kMarker, 1); at != std::string::npos; at = token.find(kMarker, at + 1)) {
      size_t from = at - 1;
      while (from > 0 && (static_cast<unsigned char>(token[from]) & 0xC0) == 0x80) --from;
      std::string before = token.substr(from, at - from);
      if (before != kMarker) glue_[before] = true;
    }
  int32_t rank = 0;
  for (auto& merge : field(model, "merges", where + "'s model")) {
    std::string left, right;
    if (merge.is_string()) {  // "left right": split at the first space, as Hugging Face's reader does
      const auto& text = merge.get_ref<const std::string&>();
      size_t space = text.find(' ');
      if (space == std::string::npos)
        throw Error(fmt::format("tokenizer: {}: merge {} ('{}') is not \"left right\"", where, rank + 1, text));
      left = text.substr(0, space), right = text.substr(space + 1);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      left = merge[0].get<std::string>(), right = merge[1].get<std::string>();
    } else {
      throw Error(fmt::format("tokenizer: {}: merge {} ({}) is not \"left right\" or [left, right]", where, rank + 1,
                              merge.dump()));
    }
    auto l = vocab_.find(left), r = vocab_.find(right);
    // the merged token: the right part without the continuing prefix's length, as Rust's reader cuts it
    std::string joined = left + right.substr(std::min(prefix_.size(), right.size()));
    auto m = vocab_.find(joined);
    if (l == vocab_.end() || r == vocab_.end() || m == vocab_.end())
      throw Error(fmt::format("tokenizer: {}: merge {} ('{}' + '{}') names a token outside the vocabulary", where,
                              rank + 1, left, right));
    merges_[pair_key(l->second, r->second)] = Merge{rank++, m->second};  // a repeated pair: the last rank, as Rust's map
  }
}

std::vector<int64_t> BpeModel::merge_word(const std::string& word) const {
  // the word's characters as symbols: a doubly linked list over `ids`
  std::vector<int64_t> ids;
  std::optional<int64_t> unk;  // a run of unknown characters not added yet
  std::string piece;
  for (size_t i = 0; i < word.size();) {
    size_t length = std::min(unicode::utf8_length(static_cast<unsigned char>(word[i])), word.size() - i);
    const bool first = i == 0, last = i + length == word.size();
    piece.assign(first ? std::string() : prefix_);
    piece.append(word, i, length);
    if (last) piece += suffix_;
    if (auto found = vocab_.find(piece); found != vocab_.end()) {
      if (unk) ids.push_back(*unk), unk.reset();
      ids.push_back(found->second);
      i += length;
      continue;
    }
    if (byte_fallback_) {  // every byte of the piece has its <0xXX>, or none is used
      bool all = true;
      for (unsigned char b : piece) all = all && byte_ids_[b] >= 0;
      if (all) {
        for (unsigned char b : piece) ids.push_back(byte_ids_[b]);  // a pending unknown waits, as in Rust's
        i += length;
        continue;
      }
    }
    if (unk_) {
      if (unk && !fuse_unk_) ids.push_back(*unk);
      unk = unk_;
    }
    i += length;
  }
  if (unk) ids.push_back(*unk);

  const int n = static_cast<int>(ids.size());
  std::vector<int> prev(n), next(n);
  std::vector<bool> removed(n, false);
  for (int k = 0; k < n; ++k) prev[k] = k - 1, next[k] = k + 1 < n ? k + 1 : -1;
  struct Candidate {
    int32_t rank;
    int pos;
    int64_t id;
    bool operator>(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  auto offer = [&](int left) {
    if (left < 0 || next[left] < 0) return;
    auto m = merges_.find(pair_key(ids[left], ids[next[left]]));
    if (m != merges_.end()) queue.push({m->second.rank, left, m->second.id});
  };
  for (int k = 0; k + 1 < n; ++k) offer(k);
  while (!queue.empty()) {
    Candidate top = queue.top();
    queue.pop();
    if (removed[top.pos] || next[top.pos] < 0) continue;
    const int right = next[top.pos];
    auto m = merges_.find(pair_key(ids[top.pos], ids[right]));
    if (m == merges_.end() || m->second.id != top.id) continue;  // an entry the merges since made stale
    ids[top.pos] = top.id;
    removed[right] = true;
    next[top.pos] = next[right];
    if (next[right] >= 0) prev[next[right]] = top.pos;
    offer(prev[top.pos]);
    offer(top.pos);
  }
  std::vector<int64_t> out;
  for (int k = 0; k < n; ++k)
    if (!removed[k]) out.push_back(ids[k]);
  return out;
}

bool BpeModel::can_cut_before_marker(const std::string& word, size_t at) const {
  size_t from = at - 1;
  while (from > 0 && (static_cast<unsigned char>(word[from]) & 0xC0) == 0x80) --from;
  const std::string before = word.substr(from, at - from);
  if (before == kMarker || glue_.count(before)) return false;
  return !glue_.count(">") || vocab_.count(before);  // a <0xXX> or <unk> symbol ends in '>'
}

void BpeModel::merge_cached(const std::string& word, std::vector<int64_t>& out) const {
  if (word.size() >= 256) {
    auto ids = merge_word(word);
    out.insert(out.end(), ids.begin(), ids.end());
    return;
  }
  std::lock_guard<std::mutex> lock(cache_mutex_);
  auto cached = cache_.find(word);
  if (cached == cache_.end()) cached = cache_.emplace(word, merge_word(word)).first;
  out.insert(out.end(), cached->second.begin(), cached->second.end());
}

void BpeModel::tokenize(const std::string& word, std::vector<int64_t>& out) const {
  if (word.empty()) return;
  if (ignore_merges_)
    if (auto found = vocab_.find(word); found != vocab_.end()) {
      out.push_back(found->second);
      return;
    }
  if (!cut_at_markers_) return merge_cached(word, out);
  size_t start = 0;
  for (size_t at = word.find(kMarker, 1); at != std::string::npos; at = word.find(kMarker, at + 1))
    if (can_cut_before_marker(word, at)) {
      merge_cached(word.substr(start, at - start), out);
      start = at;
    }
  merge_cached(word.substr(start), out);
}

}  // namespace slapo::text
