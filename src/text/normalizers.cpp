// tokenizer.json's normalizers, each as Hugging Face's tokenizers (Rust) applies it.
#include "text/normalizers.h"

#include <memory>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "text/json_fields.h"
#include "text/precompiled_charsmap.h"
#include "text/replace_stage.h"
#include "text/unicode_text.h"

namespace slapo::text {

namespace {

namespace u = unicode;

const char* kNormalizersRead =
    "read: BertNormalizer, Lowercase, NFC, NFD, NFKC, NFKD, StripAccents, Strip, Prepend, Replace, Precompiled, "
    "Sequence";

std::string lowercase(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : u::code_points(text)) u::append_lowercase(out, c);
  return out;
}

// Without the marks `is` tells: BertNormalizer strips nonspacing ones (Mn), StripAccents every
// mark (Mn, Mc, Me), as the Rust library's two definitions differ.
template <bool (*is)(char32_t)>
std::string without(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : u::code_points(text))
    if (!is(c)) u::append_utf8(out, c);
  return out;
}

// BERT's: control characters out and white space as ' ', CJK ideographs spaced apart, accents
// stripped (after NFD) when asked or when lowercasing and not told otherwise, lowercase.
Normalizer bert_normalizer(const nlohmann::json& spec) {
  bool clean = spec.value("clean_text", true), chinese = spec.value("handle_chinese_chars", true);
  bool lower = spec.value("lowercase", true);
  bool strip = spec.contains("strip_accents") && !spec["strip_accents"].is_null() ? spec["strip_accents"].get<bool>()
                                                                                    : lower;
  return [=](const std::string& text) {
    std::string out;
    out.reserve(text.size());
    bool beyond_ascii = false;
    for (size_t i = 0; i < text.size();) {
      const auto byte = static_cast<unsigned char>(text[i]);
      if (byte < 0x80) {  // ASCII: NFD leaves it, so lowercase it here
        ++i;
        if (clean && (byte == 0 || byte == 0x7F || (byte < 0x20 && byte != '\t' && byte != '\n' && byte != '\r'))) continue;
        char c = static_cast<char>(byte);
        if (clean && (c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r')) c = ' ';
        if (lower && c >= 'A' && c <= 'Z') c = static_cast<char>(c + 32);
        out.push_back(c);
        continue;
      }
      char32_t c = u::next_code_point(text, i);
      beyond_ascii = true;
      if (clean && (c == 0xFFFD || u::is_control(c))) continue;
      if (clean && u::is_whitespace(c)) c = ' ';
      if (chinese && u::is_chinese(c)) {
        out.push_back(' ');
        u::append_utf8(out, c);
        out.push_back(' ');
      } else {
        u::append_utf8(out, c);
      }
    }
    if (!beyond_ascii) return out;
    if (strip) out = without<u::is_nonspacing_mark>(u::normalize(out, u::Form::NFD));
    if (lower) out = lowercase(out);
    return out;
  };
}

Normalizer strip(const nlohmann::json& spec) {
  bool left = spec.value("strip_left", true), right = spec.value("strip_right", true);
  return [=](const std::string& text) {
    auto chars = u::code_points(text);
    size_t begin = 0, end = chars.size();
    while (left && begin < end && u::is_whitespace(chars[begin])) ++begin;
    while (right && end > begin && u::is_whitespace(chars[end - 1])) --end;
    return u::to_utf8(std::vector<char32_t>(chars.begin() + begin, chars.begin() + end));
  };
}

}  // namespace

Normalizer make_normalizer(const nlohmann::json& spec, const std::string& where) {
  if (spec.is_null()) return [](const std::string& text) { return text; };
  const std::string type = spec.is_object() ? spec.value("type", "") : "";
  if (type == "BertNormalizer") return bert_normalizer(spec);
  if (type == "Lowercase") return lowercase;
  if (type == "StripAccents") return without<u::is_mark>;
  if (type == "Strip") return strip(spec);
  if (type == "Replace") {
    Replacement r = read_replace(spec, where, "normalizer");
    return [r](const std::string& text) { return r.apply(text); };
  }
  if (type == "Precompiled") {  // SentencePiece's character map (T5's, ALBERT's, XLM-R's)
    const auto& encoded = field(spec, "precompiled_charsmap", where + "'s Precompiled normalizer");
    if (!encoded.is_string())
      throw Error(fmt::format("tokenizer: {}: Precompiled's precompiled_charsmap is base64 text, got {}", where,
                              encoded.dump().substr(0, 40)));
    auto map = std::make_shared<const PrecompiledCharsmap>(PrecompiledCharsmap::from_base64(encoded, where));
    return [map](const std::string& text) { return map->normalize(text); };
  }
  if (type == "Prepend") {  // before a text that is not empty
    const std::string prefix = field(spec, "prepend", where + "'s Prepend normalizer").get<std::string>();
    return [prefix](const std::string& text) { return text.empty() ? text : prefix + text; };
  }
  for (auto [name, form] : {std::pair{"NFC", u::Form::NFC}, std::pair{"NFD", u::Form::NFD},
                            std::pair{"NFKC", u::Form::NFKC}, std::pair{"NFKD", u::Form::NFKD}})
    if (type == name) return [form = form](const std::string& text) { return u::normalize(text, form); };
  if (type == "Sequence") {
    std::vector<Normalizer> steps;
    for (auto& each : field(spec, "normalizers", where + "'s Sequence normalizer"))
      steps.push_back(make_normalizer(each, where));
    return [steps](const std::string& text) {
      std::string out = text;
      for (auto& step : steps) out = step(out);
      return out;
    };
  }
  throw Error(fmt::format("tokenizer: {}: normalizer {} is not read yet ({})", where,
                          type.empty() ? spec.dump().substr(0, 80) : type, kNormalizersRead));
}

}  // namespace slapo::text
