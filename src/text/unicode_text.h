// Unicode for tokenizer.json's normalizers and pre-tokenizers, as Hugging Face's tokenizers (Rust)
// defines each class: code points of UTF-8 text, White_Space, BERT's control, punctuation and CJK
// ranges, char-wise lowercase, the four normalization forms. By utf8proc; a build without it
// (-DSLAPO_PCRE2=OFF) refuses by name.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace slapo::text::unicode {

/// Whether this build has utf8proc.
bool available();

/// The bytes of the UTF-8 character `lead` starts (1 for a byte that starts none).
inline size_t utf8_length(unsigned char lead) {
  return lead < 0x80 ? 1 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
}
/// The code point of UTF-8 `text` at byte `i`, advancing `i` past it; an invalid byte reads as
/// U+FFFD and advances by one.
char32_t next_code_point(std::string_view text, size_t& i);
/// The code points of UTF-8 `text`; an invalid byte reads as U+FFFD, as Rust's lossy reading does.
std::vector<char32_t> code_points(const std::string& text);
/// Whether `text` is valid UTF-8 (as Rust's String::from_utf8 accepts it).
bool is_valid_utf8(const std::string& text);
/// `c` appended to `out` as UTF-8.
void append_utf8(std::string& out, char32_t c);
std::string to_utf8(const std::vector<char32_t>& chars);

/// Rust's char::is_whitespace (Unicode White_Space).
bool is_whitespace(char32_t c);
/// BERT's control: Unicode's Other categories (Cc, Cf, Cs, Co, Cn) except tab, newline and return.
bool is_control(char32_t c);
/// BERT's punctuation: ASCII punctuation, or a Unicode punctuation category (Pc Pd Ps Pe Pi Pf Po).
bool is_punctuation(char32_t c);
/// BERT's CJK ideograph ranges.
bool is_chinese(char32_t c);
/// Category Mn (a nonspacing mark): what BertNormalizer's accent stripping removes after NFD.
bool is_nonspacing_mark(char32_t c);
/// Any mark (Mn, Mc, Me: unicode-normalization's is_combining_mark): what StripAccents removes.
bool is_mark(char32_t c);
/// Rust regex's \w: Alphabetic (letters, letter numbers, circled letters), marks, decimal digits,
/// connector punctuation, the zero-width joiners.
bool is_word(char32_t c);
/// Unicode decimal digit (Nd).
bool is_digit(char32_t c);
/// A number that is not a decimal digit (Nl, No: Ⅻ, ², ½, ①); with is_digit, Rust's char::is_numeric.
bool is_number_other(char32_t c);

/// Where the extended grapheme cluster (Unicode's UAX #29, as Rust's unicode-segmentation reads
/// it) that starts at byte `at` of `text` ends. An invalid byte is a cluster of its own.
size_t grapheme_end(const std::string& text, size_t at);

/// Char-wise lowercase as Rust's char::to_lowercase (İ becomes i + combining dot; no final sigma).
void append_lowercase(std::string& out, char32_t c);

enum class Form { NFC, NFD, NFKC, NFKD };
/// `text` in normalization form `form`; text that is not valid UTF-8 is returned as it is.
std::string normalize(const std::string& text, Form form);

}  // namespace slapo::text::unicode
