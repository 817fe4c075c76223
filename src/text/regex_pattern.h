// The regular expressions of tokenizer.json (a Split pre-tokenizer's or a Replace's pattern, GPT-2's
// pre-tokenizer) compiled by PCRE2 with Unicode properties. A build without PCRE2
// (-DSLAPO_PCRE2=OFF) refuses them by name.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

namespace slapo::text {

/// A tokenizer.json pattern (Oniguruma's syntax, as Hugging Face's tokenizers reads it) in PCRE2's:
/// \s and \S as Unicode's White_Space, which Oniguruma means and PCRE2's \s is not; `where` names
/// the file in errors.
std::string pcre2_from_oniguruma(const std::string& regex, const std::string& where);

class Regex {
 public:
  /// Whether this build has PCRE2.
  static bool available();
  /// `pattern` (PCRE2's syntax, UTF-8 subjects) compiled; `source` names it in errors.
  Regex(const std::string& pattern, const std::string& source);
  ~Regex();
  Regex(Regex&&) noexcept;

  /// The first match in subject[from, length) as [begin, end); false when there is none. Bytes that
  /// are not UTF-8 match nothing.
  bool find(const char* subject, size_t length, size_t from, size_t& begin, size_t& end) const;

  /// `each(begin, end)` for every match of subject[0, length), left to right, as the onig crate's
  /// iterator gives them to Hugging Face's tokenizers: an empty match where the last match ended is
  /// passed over (the search goes on one character later), and the end of the text is searched too.
  template <class Each>
  void for_each_match(const char* subject, size_t length, Each each) const {
    size_t from = 0, begin = 0, end = 0, last_end = 0;
    bool matched = false;
    while (from <= length && find(subject, length, from, begin, end)) {
      if (begin == end && matched && end == last_end) {
        if (from >= length) break;
        from += character_length(subject, length, from);
        continue;
      }
      each(begin, end);
      matched = true;
      from = last_end = end;
    }
  }

 private:
  static size_t character_length(const char* subject, size_t length, size_t at);
  struct Code;
  std::unique_ptr<Code> code_;
  std::string source_;  // names the pattern in errors
};

}  // namespace slapo::text
