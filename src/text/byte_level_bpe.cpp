#include "text/byte_level_bpe.h"

#if SLAPO_WITH_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

#include <nlohmann/json.hpp>

#include <climits>
#include <fstream>
#include <sstream>

#include "core/error.h"

namespace slapo::text {

namespace {

// JavaScript's \s, which the reference implementation's pattern means (PCRE2's Unicode \s differs
// in U+0085 and U+FEFF).
constexpr const char* kSpace = "\\t\\n\\x{0B}\\f\\r \\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}"
                               "\\x{205F}\\x{3000}\\x{FEFF}";

// GPT-2's pre-tokenizer: contractions, then runs of letters, of digits, of other symbols (each with
// at most one leading space), and whitespace runs (the last space of a run before a word left to it).
std::string gpt2_pattern() {
  const std::string s = kSpace;
  return "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^" + s + "\\p{L}\\p{N}]+|[" + s + "]+(?![^" + s + "])|[" + s +
         "]+";
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("tokenizer: cannot open {}", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string utf8(uint32_t code) {
  if (code < 0x80) return std::string(1, static_cast<char>(code));
  return {static_cast<char>(0xC0 | (code >> 6)), static_cast<char>(0x80 | (code & 0x3F))};
}

}  // namespace

#if SLAPO_WITH_PCRE2
struct ByteLevelBpe::Pattern {
  pcre2_code* code = nullptr;
  ~Pattern() { pcre2_code_free(code); }
};
bool ByteLevelBpe::available() { return true; }
#else
struct ByteLevelBpe::Pattern {};
bool ByteLevelBpe::available() { return false; }
#endif

ByteLevelBpe::~ByteLevelBpe() = default;

std::shared_ptr<ByteLevelBpe> ByteLevelBpe::load(const std::string& dir) {
  if (!available())
    throw Error("tokenizer: this build has no PCRE2 (built with -DSLAPO_PCRE2=OFF); GPT-2's pre-tokenizer needs it");
  std::shared_ptr<ByteLevelBpe> bpe(new ByteLevelBpe());
  const std::string encoder_path = dir + "/encoder.json", merges_path = dir + "/vocab.bpe";
  nlohmann::json encoder;
  try {
    encoder = nlohmann::json::parse(read_file(encoder_path));
  } catch (const nlohmann::json::exception& e) {
    throw Error(fmt::format("tokenizer: {} is not JSON: {}", encoder_path, e.what()));
  }
  if (!encoder.is_object() || encoder.empty())
    throw Error(fmt::format("tokenizer: {} must map each token to its id (a JSON object)", encoder_path));
  bpe->tokens_.resize(encoder.size());
  for (auto& [token, id] : encoder.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= int64_t(encoder.size()))
      throw Error(fmt::format("tokenizer: {}: token '{}' has id {}; ids run from 0 to {}", encoder_path, token,
                              id.dump(), encoder.size() - 1));
    bpe->ids_[token] = id.get<int64_t>();
    bpe->tokens_[id.get<size_t>()] = token;
  }
  std::istringstream merges(read_file(merges_path));
  std::string line;
  int rank = 0, number = 0;
  while (std::getline(merges, line)) {
    ++number;
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    if (line.find(' ') == std::string::npos || line.find(' ') != line.rfind(' '))
      throw Error(fmt::format("tokenizer: {} line {}: a merge is two tokens and one space, got '{}'", merges_path,
                              number, line));
    bpe->ranks_.emplace(line, rank++);
  }
  // GPT-2's reversible map of bytes to printable characters: the printable ones stand for
  // themselves, the others for 256, 257, ... in byte order
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    bpe->byte_chars_[b] = utf8(printable ? b : next++);
    bpe->char_bytes_[bpe->byte_chars_[b]] = static_cast<uint8_t>(b);
  }
#if SLAPO_WITH_PCRE2
  bpe->pattern_ = std::make_unique<Pattern>();
  int error = 0;
  PCRE2_SIZE at = 0;
  const std::string pattern = gpt2_pattern();
  bpe->pattern_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &at, nullptr);
  if (!bpe->pattern_->code) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw Error(fmt::format("tokenizer: the pre-tokenizer pattern does not compile at {}: {}", at,
                            reinterpret_cast<const char*>(message)));
  }
  pcre2_jit_compile(bpe->pattern_->code, PCRE2_JIT_COMPLETE);  // the interpreter runs it where JIT cannot
#endif
  return bpe;
}

const std::vector<int64_t>& ByteLevelBpe::piece_ids(const std::string& piece) const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  auto cached = cache_.find(piece);
  if (cached != cache_.end()) return cached->second;
  std::vector<std::string> word;
  for (unsigned char b : piece) word.push_back(byte_chars_[b]);
  while (word.size() > 1) {
    // the adjacent pair merged earliest in training, then every occurrence of it, left to right
    int best = INT_MAX;
    size_t at = 0;
    for (size_t i = 0; i + 1 < word.size(); ++i) {
      auto found = ranks_.find(word[i] + " " + word[i + 1]);
      if (found != ranks_.end() && found->second < best) best = found->second, at = i;
    }
    if (best == INT_MAX) break;
    const std::string left = word[at], right = word[at + 1];
    std::vector<std::string> merged;
    for (size_t i = 0; i < word.size(); ++i) {
      if (i + 1 < word.size() && word[i] == left && word[i + 1] == right) {
        merged.push_back(left + right);
        ++i;
      } else {
        merged.push_back(word[i]);
      }
    }
    word = std::move(merged);
  }
  std::vector<int64_t> ids;
  for (auto& token : word) {
    auto found = ids_.find(token);
    if (found == ids_.end()) throw Error(fmt::format("tokenizer: '{}' is in no merge's result and not in the vocabulary", token));
    ids.push_back(found->second);
  }
  return cache_.emplace(piece, std::move(ids)).first->second;
}

std::vector<int64_t> ByteLevelBpe::encode(const std::string& text) const {
  std::vector<int64_t> out;
  auto add = [&](size_t begin, size_t end) {
    if (end <= begin) return;
    const auto& ids = piece_ids(text.substr(begin, end - begin));
    out.insert(out.end(), ids.begin(), ids.end());
  };
#if SLAPO_WITH_PCRE2
  pcre2_match_data* match = pcre2_match_data_create_from_pattern(pattern_->code, nullptr);
  size_t offset = 0;
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  while (offset < text.size()) {
    int rc = pcre2_match(pattern_->code, subject, text.size(), offset, 0, match, nullptr);
    if (rc < 0) break;
    PCRE2_SIZE* span = pcre2_get_ovector_pointer(match);
    add(offset, span[0]);  // bytes no piece matches (invalid UTF-8) are a piece of their own
    add(span[0], span[1]);
    offset = span[1] > span[0] ? span[1] : span[1] + 1;
  }
  pcre2_match_data_free(match);
  add(offset, text.size());
#else
  add(0, text.size());
#endif
  return out;
}

std::string ByteLevelBpe::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size())
      throw Error(fmt::format("tokenizer: id {} is outside the vocabulary (0 .. {})", id, vocab_size() - 1));
    const std::string& token = tokens_[id];
    for (size_t i = 0; i < token.size();) {
      size_t length = static_cast<unsigned char>(token[i]) < 0x80 ? 1 : 2;
      auto found = char_bytes_.find(token.substr(i, length));
      if (found == char_bytes_.end()) throw Error(fmt::format("tokenizer: token {} ('{}') is not byte-level", id, token));
      out.push_back(static_cast<char>(found->second));
      i += length;
    }
  }
  return out;
}

std::optional<int64_t> ByteLevelBpe::token_id(const std::string& token) const {
  auto found = ids_.find(token);
  if (found == ids_.end()) return std::nullopt;
  return found->second;
}

}  // namespace slapo::text
