// tokenizer.json's regular expressions through PCRE2.
#include "text/regex_pattern.h"

#if SLAPO_WITH_PCRE2
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#endif

#include <fmt/format.h>

#include "core/error.h"
#include "text/unicode_text.h"

namespace slapo::text {

namespace {

// Unicode's White_Space, what Oniguruma's \s means in a tokenizer.json pattern (and what
// Tokenizers.js rewrites it to): JavaScript's \s without U+FEFF, with U+0085.
constexpr const char* kWhiteSpace = "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
                                    "\\x{202F}\\x{205F}\\x{3000}";

#if !SLAPO_WITH_PCRE2
[[noreturn]] void no_pcre2(const std::string& source) {
  throw Error(fmt::format("tokenizer: {}: this build has no PCRE2 (built with -DSLAPO_PCRE2=OFF) to run its regular "
                          "expression", source));
}
#endif

}  // namespace

std::string pcre2_from_oniguruma(const std::string& regex, const std::string& where) {
  // what the two syntaxes read differently: Oniguruma's (Ruby's) ^ and $ match at every line, its
  // (?m) lets . match a newline, its \h is a hexadecimal digit
  auto refuse = [&](const char* what) {
    return Error(fmt::format("tokenizer: {}: the pattern {} uses {}, which Oniguruma and PCRE2 read differently; not "
                             "read yet", where, regex.substr(0, 80), what));
  };
  if (regex.find("(?m") != std::string::npos) throw refuse("(?m)");
  std::string out;
  bool in_class = false;
  for (size_t i = 0; i < regex.size(); ++i) {
    char c = regex[i];
    if (!in_class && (c == '^' || c == '$')) throw refuse(c == '^' ? "^ outside a class" : "$");
    if (c == '\\' && i + 1 < regex.size()) {
      char next = regex[++i];
      if (next == 'h' || next == 'H') throw refuse(next == 'h' ? "\\h" : "\\H");
      if (next == 's') {
        out += in_class ? std::string(kWhiteSpace) : fmt::format("[{}]", kWhiteSpace);
      } else if (next == 'S') {
        if (in_class) throw Error(fmt::format("tokenizer: {}: \\S inside a character class is not read yet", where));
        out += fmt::format("[^{}]", kWhiteSpace);
      } else {
        out += c;
        out += next;
      }
      continue;
    }
    if (c == '[' && !in_class) {
      in_class = true;
      out += c;
      if (i + 1 < regex.size() && regex[i + 1] == '^') out += regex[++i];
      if (i + 1 < regex.size() && regex[i + 1] == ']') out += regex[++i];  // a ']' first is literal
      continue;
    }
    if (c == ']' && in_class) in_class = false;
    out += c;
  }
  return out;
}

#if SLAPO_WITH_PCRE2

struct Regex::Code {
  pcre2_code* compiled = nullptr;
  ~Code() { pcre2_code_free(compiled); }
};

bool Regex::available() { return true; }

Regex::Regex(const std::string& pattern, const std::string& source) : code_(std::make_unique<Code>()), source_(source) {
  int error = 0;
  PCRE2_SIZE at = 0;
  code_->compiled = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                                  PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &error, &at, nullptr);
  if (!code_->compiled) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    throw Error(fmt::format("tokenizer: {} does not compile at {}: {}", source, at,
                            reinterpret_cast<const char*>(message)));
  }
  pcre2_jit_compile(code_->compiled, PCRE2_JIT_COMPLETE);  // the interpreter runs it where JIT cannot
}

bool Regex::find(const char* subject, size_t length, size_t from, size_t& begin, size_t& end) const {
  // one pair of offsets is all a caller reads; one block per thread, read before the next call
  thread_local std::unique_ptr<pcre2_match_data, void (*)(pcre2_match_data*)> match(
      pcre2_match_data_create(1, nullptr), pcre2_match_data_free);
  const int rc = pcre2_match(code_->compiled, reinterpret_cast<PCRE2_SPTR>(subject), length, from, 0, match.get(),
                             nullptr);
  if (rc == PCRE2_ERROR_NOMATCH) return false;
  if (rc < 0) {  // a limit reached: the rest of the text must not pass as unmatched
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(rc, message, sizeof(message));
    throw Error(fmt::format("tokenizer: {} failed on a text of {} bytes: {}", source_, length,
                            reinterpret_cast<const char*>(message)));
  }
  const PCRE2_SIZE* span = pcre2_get_ovector_pointer(match.get());
  begin = span[0];
  end = span[1];
  return true;
}

#else

struct Regex::Code {};
bool Regex::available() { return false; }
Regex::Regex(const std::string&, const std::string& source) { no_pcre2(source); }
bool Regex::find(const char*, size_t, size_t, size_t&, size_t&) const { return false; }

#endif

Regex::~Regex() = default;
Regex::Regex(Regex&&) noexcept = default;

size_t Regex::character_length(const char* subject, size_t length, size_t at) {
  if (at >= length) return 1;
  size_t next = at;
  unicode::next_code_point(std::string_view(subject, length), next);
  return next - at;
}

}  // namespace slapo::text
