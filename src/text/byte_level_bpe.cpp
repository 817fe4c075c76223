#include "text/byte_level_bpe.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "text/json_fields.h"
#include "text/normalizers.h"
#include "text/post_processor.h"

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

std::string utf8(uint32_t code) {
  if (code < 0x80) return std::string(1, static_cast<char>(code));
  return {static_cast<char>(0xC0 | (code >> 6)), static_cast<char>(0x80 | (code & 0x3F))};
}

}  // namespace

bool ByteLevelBpe::available() { return Regex::available(); }

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
  bpe->map_bytes();
  bpe->add_split(gpt2_pattern(), true, "GPT-2's pre-tokenizer");
  bpe->bos_ = bpe->eos_ = bpe->token_id("<|endoftext|>");
  bpe->index_token_bytes();
  return bpe;
}

void ByteLevelBpe::map_bytes() {
  // GPT-2's reversible map of bytes to printable characters: the printable ones stand for
  // themselves, the others for 256, 257, ... in byte order
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    byte_chars_[b] = utf8(printable ? b : next++);
    char_bytes_[byte_chars_[b]] = static_cast<uint8_t>(b);
  }
}

void ByteLevelBpe::add_split(const std::string& pattern, bool keep_between, const std::string& source) {
  splits_.push_back({Regex(pattern, source), keep_between});
}

std::shared_ptr<ByteLevelBpe> ByteLevelBpe::load_tokenizer_json(const std::string& path) {
  return from_tokenizer_json(parse_json_file(path), path);
}

std::shared_ptr<ByteLevelBpe> ByteLevelBpe::from_tokenizer_json(const nlohmann::json& j, const std::string& path) {
  if (!available())
    throw Error("tokenizer: this build has no PCRE2 (built with -DSLAPO_PCRE2=OFF); byte-level BPE's pre-tokenizer "
                "needs it");
  std::shared_ptr<ByteLevelBpe> bpe(new ByteLevelBpe());
  const auto& model = field(j, "model", path);
  const std::string type = model.value("type", "");
  if (type != "BPE")
    throw Error(fmt::format("tokenizer: {}: model type '{}' is not read yet (read: BPE, WordPiece, Unigram)", path,
                            type));
  bpe->normalizer_ = make_normalizer(j.value("normalizer", nlohmann::json()), path);  // NFC: Qwen2's and Qwen3's
  for (const char* unused : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (model.contains(unused) && !model[unused].is_null() && model[unused] != "")
      throw Error(fmt::format("tokenizer: {}: model.{} is not read yet (byte-level BPE has none)", path, unused));
  bpe->ignore_merges_ = model.value("ignore_merges", false);

  // the vocabulary, then the added tokens' ids past it (or over it)
  const auto& vocab = field(model, "vocab", path + "'s model");
  if (!vocab.is_object() || vocab.empty())
    throw Error(fmt::format("tokenizer: {}: model.vocab must map each token to its id (a JSON object)", path));
  int64_t size = 0;
  auto check_id = [&](const nlohmann::json& id, const std::string& token) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > (int64_t(1) << 31))
      throw Error(fmt::format("tokenizer: {}: token '{}' has id {}; ids are numbers from 0", path, token, id.dump()));
    size = std::max(size, id.get<int64_t>() + 1);
    return id.get<int64_t>();
  };
  for (auto& [token, id] : vocab.items()) bpe->ids_[token] = check_id(id, token);
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (auto& added : j["added_tokens"]) {
      const std::string content = field(added, "content", path + "'s added token").get<std::string>();
      for (const char* flag : {"lstrip", "rstrip", "single_word"})
        if (added.value(flag, false))
          throw Error(fmt::format("tokenizer: {}: added token '{}' has {} = true, not read yet", path, content, flag));
      int64_t id = check_id(field(added, "id", path + "'s added token '" + content + "'"), content);
      if (content.empty()) throw Error(fmt::format("tokenizer: {}: added token {} is empty", path, id));
      bpe->added_.add({content, id});
      bpe->added_text_[id] = content;
      bpe->ids_[content] = id;
    }
  bpe->added_.sort_longest_first();
  bpe->tokens_.assign(static_cast<size_t>(size), std::string());
  for (auto& [token, id] : bpe->ids_) bpe->tokens_[static_cast<size_t>(id)] = token;
  for (auto& [id, content] : bpe->added_text_) bpe->tokens_[static_cast<size_t>(id)] = content;

  // merges: "left right" strings, or [left, right] pairs (tokenizers >= 0.20)
  int rank = 0;
  for (auto& merge : field(model, "merges", path + "'s model")) {
    if (merge.is_string() && std::count(merge.get_ref<const std::string&>().begin(),
                                        merge.get_ref<const std::string&>().end(), ' ') == 1) {
      bpe->ranks_.emplace(merge.get<std::string>(), rank++);
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() && merge[1].is_string()) {
      bpe->ranks_.emplace(merge[0].get<std::string>() + " " + merge[1].get<std::string>(), rank++);
    } else {
      throw Error(fmt::format("tokenizer: {}: merge {} ({}) is not \"left right\" or [left, right]", path, rank + 1,
                              merge.dump()));
    }
  }

  // the pre-tokenizer: ByteLevel (GPT-2's pattern, or none), alone or after Splits by patterns and Digits
  const auto& pre = field(j, "pre_tokenizer", path);
  const std::string pre_type = pre.is_object() ? pre.value("type", "") : "";
  auto refuse_pre = [&](const std::string& what) {
    return Error(fmt::format("tokenizer: {}: pre_tokenizer {} is not read yet (read: ByteLevel, or a Sequence of "
                             "Splits by a Regex (Isolated, or Removed and inverted) and Digits, then ByteLevel)",
                             path, what));
  };
  bpe->map_bytes();
  auto add_byte_level = [&](const nlohmann::json& b) {
    if (!b.is_object() || b.value("type", "") != "ByteLevel") throw refuse_pre(b.value("type", b.dump()));
    bpe->add_prefix_space_ = b.value("add_prefix_space", false);
    bpe->prefix_stage_ = bpe->splits_.size();
    if (b.value("use_regex", true)) bpe->add_split(gpt2_pattern(), true, "GPT-2's pre-tokenizer");
  };
  if (pre_type == "ByteLevel") {
    add_byte_level(pre);
  } else if (pre_type == "Sequence" && pre.contains("pretokenizers") && !pre["pretokenizers"].empty()) {
    const auto& stages = pre["pretokenizers"];
    for (size_t i = 0; i + 1 < stages.size(); ++i) {
      const auto& stage = stages[i];
      const std::string type = stage.is_object() ? stage.value("type", "") : "";
      if (type == "Digits") {  // numeric characters (Rust's is_numeric: \p{N}) alone or in runs
        bpe->add_split(stage.value("individual_digits", false) ? "\\p{N}" : "\\p{N}+", true,
                       fmt::format("{}'s Digits pre-tokenizer", path));
        continue;
      }
      if (type != "Split" || !stage.contains("pattern") || !stage["pattern"].is_object() ||
          !stage["pattern"].contains("Regex") || !stage["pattern"]["Regex"].is_string())
        throw refuse_pre(stage.dump().substr(0, 120));
      const std::string behavior = stage.value("behavior", "");
      const bool invert = stage.value("invert", false);
      // Isolated keeps matches and what lies between them; Removed and inverted only the matches
      if (!(behavior == "Isolated" || (behavior == "Removed" && invert))) throw refuse_pre(stage.dump().substr(0, 120));
      const std::string regex = stage["pattern"]["Regex"].get<std::string>();
      bpe->add_split(pcre2_from_oniguruma(regex, path), behavior == "Isolated",
                     fmt::format("{}'s Split pattern {}", path, i + 1));
    }
    add_byte_level(stages[stages.size() - 1]);
  } else {
    throw refuse_pre(pre_type.empty() ? pre.dump().substr(0, 120) : pre_type);
  }

  // the post-processor's special tokens around a text (LLaMA-3.1's BOS)
  if (j.contains("post_processor")) {
    bpe->post_ = read_post_processor(j["post_processor"], path);
  }

  // bos and eos: tokenizer_config.json beside it names them
  namespace fs = std::filesystem;
  auto config_path = fs::path(path).parent_path() / "tokenizer_config.json";
  if (fs::exists(config_path)) {
    auto config = parse_json_file(config_path.string());
    if (auto bos = config_token(config, "bos_token")) bpe->bos_ = bpe->token_id(*bos);
    if (auto eos = config_token(config, "eos_token")) bpe->eos_ = bpe->token_id(*eos);
  }
  bpe->index_token_bytes();
  return bpe;
}

const std::vector<int64_t>& ByteLevelBpe::piece_ids(const std::string& piece) const {
  std::lock_guard<std::mutex> lock(cache_mutex_);
  auto cached = cache_.find(piece);
  if (cached != cache_.end()) return cached->second;
  std::vector<std::string> word;
  for (unsigned char b : piece) word.push_back(byte_chars_[b]);
  if (ignore_merges_) {  // a piece that is a token is that token
    std::string whole;
    for (auto& c : word) whole += c;
    if (auto found = ids_.find(whole); found != ids_.end())
      return cache_.emplace(piece, std::vector<int64_t>{found->second}).first->second;
  }
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

void ByteLevelBpe::encode_ordinary(const std::string& text, size_t begin, size_t end, std::vector<int64_t>& out) const {
  split_and_merge(text, begin, end, 0, out);
}

void ByteLevelBpe::split_and_merge(const std::string& text, size_t begin, size_t end, size_t stage,
                                   std::vector<int64_t>& out, bool spaced) const {
  if (end <= begin) return;
  if (add_prefix_space_ && stage == prefix_stage_ && !spaced && text[begin] != ' ') {
    // ByteLevel's add_prefix_space: each piece it is given starts with a space
    const std::string with_space = " " + text.substr(begin, end - begin);
    return split_and_merge(with_space, 0, with_space.size(), stage, out, true);
  }
  if (stage == splits_.size()) {
    const auto& ids = piece_ids(text.substr(begin, end - begin));
    out.insert(out.end(), ids.begin(), ids.end());
    return;
  }
  // each stage sees one piece of the stage before as its whole subject, as Hugging Face's splits do
  const Stage& split = splits_[stage];
  size_t offset = 0;
  split.regex.for_each_match(text.data() + begin, end - begin, [&](size_t first, size_t last) {
    // between matches: a piece (Isolated), or dropped (Removed, inverted: bytes no match covers,
    // invalid UTF-8 among them, are dropped as Hugging Face's split drops them)
    if (first > offset && split.keep_between) split_and_merge(text, begin + offset, begin + first, stage + 1, out);
    split_and_merge(text, begin + first, begin + last, stage + 1, out);
    offset = last;
  });
  if (begin + offset < end && split.keep_between) split_and_merge(text, begin + offset, end, stage + 1, out);
}

void ByteLevelBpe::encode_normalized(const std::string& text, size_t begin, size_t end, std::vector<int64_t>& out) const {
  const std::string normalized = normalizer_(text.substr(begin, end - begin));
  encode_ordinary(normalized, 0, normalized.size(), out);
}

void ByteLevelBpe::encode_text(const std::string& text, std::vector<int64_t>& out) const {
  // added tokens first, as Hugging Face's tokenizers split them; the text between them normalized
  // and pre-tokenized
  added_.split(
      text, [&](const std::string& plain, size_t) { encode_normalized(plain, 0, plain.size(), out); },
      [&](int64_t id) { out.push_back(id); });
}

std::vector<int64_t> ByteLevelBpe::encode(const std::string& text) const {
  std::vector<int64_t> out(post_.single.prefix);
  encode_text(text, out);
  out.insert(out.end(), post_.single.suffix.begin(), post_.single.suffix.end());
  return out;
}

IdsAndTypes ByteLevelBpe::encode_pair(const std::string& first, const std::string& second) const {
  std::vector<int64_t> a, b;
  encode_text(first, a);
  encode_text(second, b);
  return post_.apply_pair(a, b);
}

void ByteLevelBpe::index_token_bytes() {
  token_bytes_.assign(tokens_.size(), std::string());
  byte_level_.assign(tokens_.size(), true);
  for (size_t id = 0; id < tokens_.size(); ++id) {
    if (auto added = added_text_.find(static_cast<int64_t>(id)); added != added_text_.end()) {
      token_bytes_[id] = added->second;
      continue;
    }
    const std::string& token = tokens_[id];
    for (size_t i = 0; i < token.size();) {
      size_t length = static_cast<unsigned char>(token[i]) < 0x80 ? 1 : 2;
      auto found = char_bytes_.find(token.substr(i, length));
      if (found == char_bytes_.end()) {
        byte_level_[id] = false;
        break;
      }
      token_bytes_[id].push_back(static_cast<char>(found->second));
      i += length;
    }
  }
}

std::string ByteLevelBpe::decode(const std::vector<int64_t>& ids) const {
  std::string out;
  out.reserve(ids.size() * 4);
  for (int64_t id : ids) {
    if (id < 0 || id >= vocab_size())
      throw Error(fmt::format("tokenizer: id {} is outside the vocabulary (0 .. {})", id, vocab_size() - 1));
    if (!byte_level_[static_cast<size_t>(id)])
      throw Error(fmt::format("tokenizer: token {} ('{}') is not byte-level", id, tokens_[static_cast<size_t>(id)]));
    out += token_bytes_[static_cast<size_t>(id)];
  }
  return out;
}

std::optional<int64_t> ByteLevelBpe::token_id(const std::string& token) const {
  auto found = ids_.find(token);
  if (found == ids_.end()) return std::nullopt;
  return found->second;
}

}  // namespace slapo::text
