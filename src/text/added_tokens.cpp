// Splitting a text at a tokenizer.json's added tokens.
#include "text/added_tokens.h"

#include <algorithm>

#include "text/unicode_text.h"

namespace slapo::text {

namespace {

bool whitespace_before(const std::string& text, size_t at, size_t* start) {
  // the UTF-8 character ending at `at`, when it is white space
  size_t from = at;
  while (from > 0 && (static_cast<unsigned char>(text[from - 1]) & 0xC0) == 0x80) --from;
  if (from == 0) return false;
  --from;
  auto chars = unicode::code_points(text.substr(from, at - from));
  if (chars.size() != 1 || !unicode::is_whitespace(chars[0])) return false;
  *start = from;
  return true;
}

bool whitespace_after(const std::string& text, size_t at, size_t* end) {
  if (at >= text.size()) return false;
  size_t to = at + 1;
  while (to < text.size() && (static_cast<unsigned char>(text[to]) & 0xC0) == 0x80) ++to;
  auto chars = unicode::code_points(text.substr(at, to - at));
  if (chars.size() != 1 || !unicode::is_whitespace(chars[0])) return false;
  *end = to;
  return true;
}

}  // namespace

void AddedTokens::add(AddedToken token) {
  starts_one_[static_cast<unsigned char>(token.content[0])] = true;
  longest_first_.push_back(std::move(token));
}

void AddedTokens::sort_longest_first() {
  std::stable_sort(longest_first_.begin(), longest_first_.end(),
                   [](auto& a, auto& b) { return a.content.size() > b.content.size(); });
  trie_.assign(1, Node());
  root_children_.assign(256, -1);
  for (size_t i = 0; i < longest_first_.size(); ++i) {
    int node = 0;
    for (unsigned char byte : longest_first_[i].content) {
      int next = -1;
      if (node == 0) {
        next = root_children_[byte];
      } else {
        for (auto& [b, child] : trie_[node].children)
          if (b == byte) next = child;
      }
      if (next < 0) {
        next = static_cast<int>(trie_.size());
        trie_.emplace_back();
        if (node == 0) root_children_[byte] = next;
        else trie_[node].children.emplace_back(byte, next);
      }
      node = next;
    }
    if (trie_[node].token < 0) trie_[node].token = static_cast<int>(i);  // of two alike, the first added
  }
}

const AddedToken* AddedTokens::match_at(const std::string& text, size_t at) const {
  int node = root_children_[static_cast<unsigned char>(text[at])], found = -1;
  for (size_t i = at + 1; node >= 0; ++i) {
    if (trie_[node].token >= 0) found = trie_[node].token;
    if (i == text.size()) break;
    const auto byte = static_cast<unsigned char>(text[i]);
    int next = -1;
    for (auto& [b, child] : trie_[node].children)
      if (b == byte) next = child;
    node = next;
  }
  return found < 0 ? nullptr : &longest_first_[found];
}

void AddedTokens::split(const std::string& text, const std::function<void(const std::string&, size_t)>& plain,
                        const std::function<void(int64_t)>& added) const {
  size_t start = 0;
  for (size_t i = 0; i < text.size();) {
    const AddedToken* hit = starts_one_[static_cast<unsigned char>(text[i])] ? match_at(text, i) : nullptr;
    if (!hit) {
      ++i;
      continue;
    }
    size_t begin = i, end = i + hit->content.size();
    if (hit->lstrip)
      for (size_t from; begin > start && whitespace_before(text, begin, &from);) begin = from;
    if (hit->rstrip)
      for (size_t to; whitespace_after(text, end, &to);) end = to;
    if (begin > start) plain(text.substr(start, begin - start), start);
    added(hit->id);
    i = start = end;
  }
  if (start < text.size()) plain(text.substr(start), start);
}

}  // namespace slapo::text
