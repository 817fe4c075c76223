// SentencePiece's precompiled character map, read as Hugging Face's tokenizers reads it.
#include "text/precompiled_charsmap.h"

#include <cstring>

#include <fmt/format.h>

#include "core/error.h"
#include "text/unicode_text.h"

namespace slapo::text {

namespace {

std::string decode_base64(const std::string& encoded, const std::string& where) {
  auto value = [](char c) -> int {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
  };
  std::string out;
  out.reserve(encoded.size() / 4 * 3);
  uint32_t bits = 0;
  int count = 0;
  size_t i = 0;
  for (; i < encoded.size() && encoded[i] != '='; ++i) {
    const int v = value(encoded[i]);
    if (v < 0)
      throw Error(fmt::format("tokenizer: {}: Precompiled's precompiled_charsmap is not base64 (character {} is '{}')",
                              where, i, encoded[i]));
    bits = (bits << 6) | static_cast<uint32_t>(v);
    if (++count == 4) {
      out.push_back(static_cast<char>(bits >> 16));
      out.push_back(static_cast<char>(bits >> 8));
      out.push_back(static_cast<char>(bits));
      bits = 0, count = 0;
    }
  }
  // padding: at most two '=', and nothing after them
  if (encoded.find_first_not_of('=', i) != std::string::npos || encoded.size() - i > 2)
    throw Error(fmt::format("tokenizer: {}: Precompiled's precompiled_charsmap is not base64 (text after its padding at "
                            "{})", where, i));
  if (count == 1) throw Error(fmt::format("tokenizer: {}: Precompiled's precompiled_charsmap is cut short", where));
  if (count == 2) out.push_back(static_cast<char>(bits >> 4));
  if (count == 3) out.push_back(static_cast<char>(bits >> 10)), out.push_back(static_cast<char>(bits >> 2));
  return out;
}

// A double-array unit (darts-clone's layout): a label, whether a leaf hangs below, where the
// children are; a leaf's unit is its value.
bool has_leaf(uint32_t unit) { return (unit >> 8) & 1; }
uint32_t value(uint32_t unit) { return unit & 0x7FFFFFFFu; }
uint32_t label(uint32_t unit) { return unit & (0x80000000u | 0xFFu); }
uint32_t offset(uint32_t unit) { return (unit >> 10) << ((unit & (1u << 9)) >> 6); }

}  // namespace

PrecompiledCharsmap PrecompiledCharsmap::from_base64(const std::string& encoded, const std::string& where) {
  const std::string blob = decode_base64(encoded, where);
  uint32_t trie_bytes = 0;
  if (blob.size() >= 4) std::memcpy(&trie_bytes, blob.data(), 4);  // little-endian, as x86 and ARM are
  if (blob.size() < 4 || trie_bytes % 4 != 0 || trie_bytes == 0 || trie_bytes > blob.size() - 4)
    throw Error(fmt::format("tokenizer: {}: Precompiled's precompiled_charsmap is not SentencePiece's character map "
                            "({} bytes; it starts with the trie's size, then the trie, then the replacements)",
                            where, blob.size()));
  PrecompiledCharsmap map;
  map.trie_.resize(trie_bytes / 4);
  std::memcpy(map.trie_.data(), blob.data() + 4, trie_bytes);
  map.replacements_ = blob.substr(4 + trie_bytes);
  if (!unicode::is_valid_utf8(map.replacements_))
    throw Error(fmt::format("tokenizer: {}: Precompiled's replacements are not UTF-8", where));
  for (int byte = 0; byte < 128; ++byte) {
    const char c = static_cast<char>(byte);
    if (auto rule = map.shortest_rule(&c, 1)) map.ascii_[byte] = std::string(*rule);
  }
  return map;
}

std::optional<std::string_view> PrecompiledCharsmap::shortest_rule(const char* key, size_t length) const {
  size_t node = offset(trie_[0]);
  for (size_t i = 0; i < length && key[i] != 0; ++i) {
    const auto byte = static_cast<unsigned char>(key[i]);
    node ^= byte;
    if (node >= trie_.size() || label(trie_[node]) != byte) return std::nullopt;
    const uint32_t unit = trie_[node];
    node ^= offset(unit);
    if (has_leaf(unit)) {
      if (node >= trie_.size()) return std::nullopt;
      const size_t begin = value(trie_[node]);
      if (begin >= replacements_.size()) return std::string_view();
      const size_t end = replacements_.find('\0', begin);
      return std::string_view(replacements_).substr(begin, (end == std::string::npos ? replacements_.size() : end) - begin);
    }
  }
  return std::nullopt;
}

std::string PrecompiledCharsmap::normalize(const std::string& text) const {
  std::string out;
  out.reserve(text.size());
  for (size_t at = 0; at < text.size();) {
    const auto byte = static_cast<unsigned char>(text[at]);
    // an ASCII character before another ASCII one is a cluster of its own, unless CR LF
    if (byte < 0x80 && (at + 1 == text.size() || (static_cast<unsigned char>(text[at + 1]) < 0x80 &&
                                                  !(byte == '\r' && text[at + 1] == '\n')))) {
      if (const auto& rule = ascii_[byte]) out += *rule;
      else out.push_back(static_cast<char>(byte));
      ++at;
      continue;
    }
    const size_t end = unicode::grapheme_end(text, at);
    if (end - at < 6) {
      if (auto rule = shortest_rule(text.data() + at, end - at)) {
        out += *rule;
        at = end;
        continue;
      }
    }
    while (at < end) {
      size_t next = at;
      unicode::next_code_point(text, next);
      if (auto rule = shortest_rule(text.data() + at, next - at)) out += *rule;
      else out.append(text, at, next - at);
      at = next;
    }
  }
  return out;
}

}  // namespace slapo::text
