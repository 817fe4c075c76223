// UTF-8 as the tokenizers read it (src/text/unicode_text.h), where Rust's String::from_utf8 is the reference.
#include <doctest/doctest.h>

#include <string>

#include "text/unicode_text.h"

using namespace slapo::text;

TEST_CASE("unicode: next_code_point reads valid UTF-8 and steps one byte past each invalid one") {
  const std::string text = "a\xC3\xA9\xF0\x9F\x98\x80";  // a, é, 😀
  size_t i = 0;
  CHECK(unicode::next_code_point(text, i) == U'a');
  CHECK(unicode::next_code_point(text, i) == U'\u00E9');
  CHECK(unicode::next_code_point(text, i) == U'\U0001F600');
  CHECK(i == text.size());
  // no lead byte F8-FF starts a character (F8 90 80 80 would spell U+10000 if its bits were read)
  for (const std::string bad : {"\xF8\x90\x80\x80", "\xC0\xAF", "\xED\xA0\x80", "\x80"}) {
    size_t at = 0;
    CHECK(unicode::next_code_point(bad, at) == 0xFFFD);
    CHECK(at == 1);
    CHECK_FALSE(unicode::is_valid_utf8(bad));
  }
  CHECK(unicode::is_valid_utf8(text));
}
