// Unicode classes for tokenizer.json, each as Hugging Face's tokenizers (Rust) tests it.
#include "text/unicode_text.h"

#include <cstdlib>

#include <fmt/format.h>

#if SLAPO_WITH_UTF8PROC
#include <utf8proc.h>
#endif

#include "core/error.h"

namespace slapo::text::unicode {

namespace {

#if !SLAPO_WITH_UTF8PROC
[[noreturn]] void no_utf8proc() {
  throw Error("tokenizer: this build has no utf8proc (built with -DSLAPO_PCRE2=OFF); tokenizer.json's normalizers "
              "and pre-tokenizers need it");
}
#else
utf8proc_category_t category(char32_t c) { return utf8proc_category(static_cast<utf8proc_int32_t>(c)); }
#endif

}  // namespace

#if SLAPO_WITH_UTF8PROC
bool available() { return true; }
#else
bool available() { return false; }
#endif

char32_t next_code_point(std::string_view text, size_t& i) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  unsigned char b = p[i];
  if (b < 0x80) {
    ++i;
    return b;
  }
  int length = b >= 0xF8 ? 0 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC0 ? 2 : 0;  // F8-FF start none
  char32_t c = length == 4 ? b & 0x07 : length == 3 ? b & 0x0F : b & 0x1F;
  bool ok = length > 0 && i + length <= n;
  for (int k = 1; ok && k < length; ++k) {
    ok = (p[i + k] & 0xC0) == 0x80;
    c = (c << 6) | (p[i + k] & 0x3F);
  }
  ok = ok && c <= 0x10FFFF && !(c >= 0xD800 && c <= 0xDFFF) && !(length == 2 && c < 0x80) &&
       !(length == 3 && c < 0x800) && !(length == 4 && c < 0x10000);
  i += ok ? static_cast<size_t>(length) : 1;
  return ok ? c : 0xFFFD;
}

std::vector<char32_t> code_points(const std::string& text) {
  std::vector<char32_t> out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size();) out.push_back(next_code_point(text, i));
  return out;
}

bool is_valid_utf8(const std::string& text) {
  for (size_t i = 0; i < text.size();) {
    const size_t at = i;
    // U+FFFD is what an invalid byte reads as: valid only where the text spells it
    if (next_code_point(text, i) == 0xFFFD && text.compare(at, 3, "\xEF\xBF\xBD") != 0) return false;
  }
  return true;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string to_utf8(const std::vector<char32_t>& chars) {
  std::string out;
  out.reserve(chars.size());
  for (char32_t c : chars) append_utf8(out, c);
  return out;
}

bool is_whitespace(char32_t c) {
  switch (c) {
    case 0x09: case 0x0A: case 0x0B: case 0x0C: case 0x0D: case 0x20: case 0x85: case 0xA0: case 0x1680:
    case 0x2028: case 0x2029: case 0x202F: case 0x205F: case 0x3000:
      return true;
    default:
      return c >= 0x2000 && c <= 0x200A;
  }
}

bool is_control(char32_t c) {
  if (c == '\t' || c == '\n' || c == '\r') return false;
#if SLAPO_WITH_UTF8PROC
  switch (category(c)) {
    case UTF8PROC_CATEGORY_CC: case UTF8PROC_CATEGORY_CF: case UTF8PROC_CATEGORY_CS: case UTF8PROC_CATEGORY_CO:
    case UTF8PROC_CATEGORY_CN:
      return true;
    default:
      return false;
  }
#else
  no_utf8proc();
#endif
}

bool is_punctuation(char32_t c) {
  if (c < 0x80) return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) || (c >= 123 && c <= 126);
#if SLAPO_WITH_UTF8PROC
  switch (category(c)) {
    case UTF8PROC_CATEGORY_PC: case UTF8PROC_CATEGORY_PD: case UTF8PROC_CATEGORY_PS: case UTF8PROC_CATEGORY_PE:
    case UTF8PROC_CATEGORY_PI: case UTF8PROC_CATEGORY_PF: case UTF8PROC_CATEGORY_PO:
      return true;
    default:
      return false;
  }
#else
  no_utf8proc();
#endif
}

bool is_chinese(char32_t c) {
  return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
         (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
         (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

bool is_nonspacing_mark(char32_t c) {
  if (c < 0x300) return false;
#if SLAPO_WITH_UTF8PROC
  return category(c) == UTF8PROC_CATEGORY_MN;
#else
  no_utf8proc();
#endif
}

bool is_mark(char32_t c) {
  if (c < 0x300) return false;
#if SLAPO_WITH_UTF8PROC
  const auto cat = category(c);
  return cat == UTF8PROC_CATEGORY_MN || cat == UTF8PROC_CATEGORY_MC || cat == UTF8PROC_CATEGORY_ME;
#else
  no_utf8proc();
#endif
}

bool is_word(char32_t c) {
  if (c < 0x80) return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
  if (c == 0x200C || c == 0x200D) return true;  // Join_Control: the joiner inside emoji sequences
  // the symbols Unicode counts as Alphabetic: circled and squared Latin letters
  if ((c >= 0x24B6 && c <= 0x24E9) || (c >= 0x1F130 && c <= 0x1F149) || (c >= 0x1F150 && c <= 0x1F169) ||
      (c >= 0x1F170 && c <= 0x1F189))
    return true;
#if SLAPO_WITH_UTF8PROC
  switch (category(c)) {
    case UTF8PROC_CATEGORY_LU: case UTF8PROC_CATEGORY_LL: case UTF8PROC_CATEGORY_LT: case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO: case UTF8PROC_CATEGORY_NL: case UTF8PROC_CATEGORY_MN: case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME: case UTF8PROC_CATEGORY_ND: case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
#else
  no_utf8proc();
#endif
}

bool is_digit(char32_t c) {
  if (c < 0x80) return c >= '0' && c <= '9';
#if SLAPO_WITH_UTF8PROC
  return category(c) == UTF8PROC_CATEGORY_ND;
#else
  no_utf8proc();
#endif
}

bool is_number_other(char32_t c) {
  if (c < 0x80) return false;
#if SLAPO_WITH_UTF8PROC
  return category(c) == UTF8PROC_CATEGORY_NL || category(c) == UTF8PROC_CATEGORY_NO;
#else
  no_utf8proc();
#endif
}

size_t grapheme_end(const std::string& text, size_t at) {
#if SLAPO_WITH_UTF8PROC
  size_t i = at;
  char32_t previous = next_code_point(text, i);
  if (previous == 0xFFFD && i == at + 1) return i;  // an invalid byte
  utf8proc_int32_t state = 0;
  while (i < text.size()) {
    size_t next = i;
    const char32_t c = next_code_point(text, next);
    if (c == 0xFFFD && next == i + 1) break;
    if (utf8proc_grapheme_break_stateful(static_cast<utf8proc_int32_t>(previous), static_cast<utf8proc_int32_t>(c),
                                         &state))
      break;
    previous = c;
    i = next;
  }
  return i;
#else
  (void)text, (void)at;
  no_utf8proc();
#endif
}

void append_lowercase(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c >= 'A' && c <= 'Z' ? c + 32 : c));
    return;
  }
  if (c == 0x130) {  // the one unconditional lowercase mapping to two characters
    out += "i\xCC\x87";
    return;
  }
#if SLAPO_WITH_UTF8PROC
  append_utf8(out, static_cast<char32_t>(utf8proc_tolower(static_cast<utf8proc_int32_t>(c))));
#else
  no_utf8proc();
#endif
}

std::string normalize(const std::string& text, Form form) {
  bool ascii = true;
  for (char ch : text) ascii = ascii && static_cast<unsigned char>(ch) < 0x80;
  if (ascii) return text;  // ASCII is its own form, in all four
#if SLAPO_WITH_UTF8PROC
  int options = UTF8PROC_STABLE;
  switch (form) {
    case Form::NFC: options |= UTF8PROC_COMPOSE; break;
    case Form::NFD: options |= UTF8PROC_DECOMPOSE; break;
    case Form::NFKC: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
    case Form::NFKD: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
  }
  // text that is not UTF-8 is left as it is: a byte-level BPE keeps such bytes as tokens of their own,
  // and Hugging Face's tokenizers only ever see valid text
  if (!is_valid_utf8(text)) return text;
  utf8proc_uint8_t* mapped = nullptr;
  auto size = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                           static_cast<utf8proc_ssize_t>(text.size()), &mapped,
                           static_cast<utf8proc_option_t>(options));
  if (size < 0) throw Error(fmt::format("tokenizer: utf8proc cannot normalize the text: {}", utf8proc_errmsg(size)));
  std::string out(reinterpret_cast<const char*>(mapped), static_cast<size_t>(size));
  std::free(mapped);
  return out;
#else
  (void)form;
  no_utf8proc();
#endif
}

}  // namespace slapo::text::unicode
