// tokenizer.json's pre-tokenizers, each as Hugging Face's tokenizers (Rust) splits.
#include "text/pre_tokenizers.h"

#include <algorithm>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"
#include "text/json_fields.h"
#include "text/regex_pattern.h"
#include "text/unicode_text.h"

namespace slapo::text {

namespace {

namespace u = unicode;

// Words of `text` by a class of each character: `drop` ends a word and is left out, `alone` ends
// a word and is one of its own.
template <class Drop, class Alone>
void split_by_class(const std::string& text, std::vector<std::string>& words, Drop drop, Alone alone) {
  size_t begin = 0;  // where the word being read starts
  for (size_t i = 0; i < text.size();) {
    const size_t at = i;
    const char32_t c = u::next_code_point(text, i);
    const bool dropped = drop(c);
    if (!dropped && !alone(c)) continue;
    if (at > begin) words.emplace_back(text, begin, at - begin);
    if (!dropped) words.emplace_back(text, at, i - at);
    begin = i;
  }
  if (text.size() > begin) words.emplace_back(text, begin, text.size() - begin);
}

// Whitespace's \w+|[^\w\s]+: runs of word characters and runs of other non-space characters.
void word_or_symbol_runs(const std::string& text, std::vector<std::string>& words) {
  std::string run;
  int kind = 0;  // 0: none, 1: word characters, 2: other symbols
  for (char32_t c : u::code_points(text)) {
    int now = u::is_whitespace(c) ? 0 : u::is_word(c) ? 1 : 2;
    if (now != kind && !run.empty()) words.push_back(std::move(run)), run.clear();
    kind = now;
    if (now) u::append_utf8(run, c);
  }
  if (!run.empty()) words.push_back(std::move(run));
}

const std::string kMarker = "\xE2\x96\x81";  // "▁"

struct Span {
  size_t begin, end;
  bool delimiter;
};

// Split by a pattern: the text as alternating spans of delimiters (the pattern's occurrences, or with
// `invert` everything else) and the rest, then joined or dropped as the behavior says (Hugging Face's
// NormalizedString::split).
void keep_by_behavior(const std::string& text, const std::vector<Span>& spans, const std::string& behavior,
                    std::vector<std::string>& words) {
  std::vector<Span> kept;  // delimiter here means "drop"
  bool previous = false;
  if (behavior == "Removed") {
    kept = spans;
  } else if (behavior == "Isolated") {
    for (auto s : spans) kept.push_back({s.begin, s.end, false});
  } else if (behavior == "Contiguous") {
    for (auto s : spans) {
      if (!kept.empty() && s.delimiter && previous) kept.back().end = s.end;
      else kept.push_back({s.begin, s.end, false});
      previous = s.delimiter;
    }
  } else if (behavior == "MergedWithPrevious") {
    for (auto s : spans) {
      if (s.delimiter && !previous && !kept.empty()) kept.back().end = s.end;
      else kept.push_back({s.begin, s.end, false});
      previous = s.delimiter;
    }
  } else {  // MergedWithNext: the same from the end
    for (auto it = spans.rbegin(); it != spans.rend(); ++it) {
      if (it->delimiter && !previous && !kept.empty()) kept.back().begin = it->begin;
      else kept.push_back({it->begin, it->end, false});
      previous = it->delimiter;
    }
    std::reverse(kept.begin(), kept.end());
  }
  for (auto s : kept)
    if (!s.delimiter && s.end > s.begin) words.emplace_back(text, s.begin, s.end - s.begin);
}

void split_on(const std::string& text, const std::string& needle, const std::string& behavior, bool invert,
              std::vector<std::string>& words) {
  std::vector<Span> spans;
  size_t at = 0;
  if (!needle.empty())
    for (size_t hit; (hit = text.find(needle, at)) != std::string::npos; at = hit + needle.size()) {
      if (hit > at) spans.push_back({at, hit, invert});
      spans.push_back({hit, hit + needle.size(), !invert});
    }
  if (at < text.size()) spans.push_back({at, text.size(), invert});
  keep_by_behavior(text, spans, behavior, words);
}

// Split by a class of characters: each character of it a delimiter of its own (Hugging Face's
// Pattern for a char predicate), then kept as the behavior says
template <class Is>
void split_by_character(const std::string& text, Is is, const std::string& behavior, std::vector<std::string>& words) {
  std::vector<Span> spans;
  size_t at = 0;
  for (size_t i = 0; i < text.size();) {
    const size_t begin = i;
    if (!is(u::next_code_point(text, i))) continue;
    if (begin > at) spans.push_back({at, begin, false});
    spans.push_back({begin, i, true});
    at = i;
  }
  if (at < text.size()) spans.push_back({at, text.size(), false});
  keep_by_behavior(text, spans, behavior, words);
}

bool is_numeric(char32_t c) { return u::is_digit(c) || u::is_number_other(c); }

std::string read_behavior(const nlohmann::json& spec, const char* fallback, const std::string& where) {
  const std::string behavior = spec.value("behavior", fallback);
  for (const char* known : {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"})
    if (behavior == known) return behavior;
  throw Error(fmt::format("tokenizer: {}: Split behavior '{}' is unknown (choices: Removed, Isolated, "
                          "MergedWithPrevious, MergedWithNext, Contiguous)", where, behavior));
}

// The spans of a Regex pattern's matches (empty ones too) and of the text between them, as Hugging
// Face's find_matches gives them.
std::vector<Span> regex_spans(const Regex& regex, const std::string& text, bool invert) {
  std::vector<Span> spans;
  size_t at = 0;
  regex.for_each_match(text.data(), text.size(), [&](size_t begin, size_t end) {
    if (begin > at) spans.push_back({at, begin, invert});
    spans.push_back({begin, end, !invert});
    at = end;
  });
  if (at < text.size()) spans.push_back({at, text.size(), invert});
  return spans;
}

PreTokenizer split(const nlohmann::json& spec, const std::string& where) {
  const auto& pattern = field(spec, "pattern", where + "'s Split pre_tokenizer");
  field(spec, "behavior", where + "'s Split pre_tokenizer");
  const std::string behavior = read_behavior(spec, "", where);
  const bool invert = spec.value("invert", false);
  if (pattern.contains("Regex")) {
    auto regex = std::make_shared<const Regex>(pcre2_from_oniguruma(pattern["Regex"].get<std::string>(), where),
                                               where + "'s Split pattern");
    return [regex, behavior, invert](const std::string& text, bool, std::vector<std::string>& words) {
      keep_by_behavior(text, regex_spans(*regex, text, invert), behavior, words);
    };
  }
  if (!pattern.contains("String"))
    throw Error(fmt::format("tokenizer: {}: a Split pre_tokenizer's pattern is a String or a Regex, got {}", where,
                            pattern.dump().substr(0, 80)));
  const std::string needle = pattern["String"].get<std::string>();
  return [needle, behavior, invert](const std::string& text, bool, std::vector<std::string>& words) {
    split_on(text, needle, behavior, invert, words);
  };
}

// Metaspace (SentencePiece's spaces): spaces become the replacement ("▁"), one is put first as
// prepend_scheme says (always; first: at the start of the input only; never), and with `split` the
// text is cut before each replacement.
PreTokenizer metaspace(const nlohmann::json& spec, const std::string& where) {
  const std::string replacement = spec.value("replacement", kMarker);
  if (u::code_points(replacement).size() != 1)
    throw Error(fmt::format("tokenizer: {}: Metaspace's replacement is one character, got '{}'", where, replacement));
  std::string scheme = spec.value("prepend_scheme", "");
  if (scheme.empty()) scheme = spec.value("add_prefix_space", true) ? "always" : "never";  // files before 0.19
  if (scheme != "always" && scheme != "first" && scheme != "never")
    throw Error(fmt::format("tokenizer: {}: Metaspace prepend_scheme '{}' is unknown (choices: always, first, never)",
                            where, scheme));
  const bool cut = spec.value("split", true);
  return [replacement, scheme, cut](const std::string& text, bool at_start, std::vector<std::string>& words) {
    std::string spaced;
    spaced.reserve(text.size() + replacement.size());
    for (char c : text) c == ' ' ? spaced += replacement : spaced += c;
    const bool starts = spaced.compare(0, replacement.size(), replacement) == 0;
    if (!starts && (scheme == "always" || (scheme == "first" && at_start))) spaced.insert(0, replacement);
    if (cut) return split_on(spaced, replacement, "MergedWithNext", false, words);
    if (!spaced.empty()) words.push_back(std::move(spaced));
  };
}

}  // namespace

PreTokenizer make_pre_tokenizer(const nlohmann::json& spec, const std::string& where) {
  if (spec.is_null())
    return [](const std::string& text, bool, std::vector<std::string>& words) {
      if (!text.empty()) words.push_back(text);
    };
  const std::string type = spec.is_object() ? spec.value("type", "") : "";
  if (type == "BertPreTokenizer")
    return [](const std::string& text, bool, std::vector<std::string>& words) {
      split_by_class(text, words, u::is_whitespace, u::is_punctuation);
    };
  if (type == "WhitespaceSplit")
    return [](const std::string& text, bool, std::vector<std::string>& words) {
      split_by_class(text, words, u::is_whitespace, [](char32_t) { return false; });
    };
  if (type == "Whitespace")
    return [](const std::string& text, bool, std::vector<std::string>& words) { word_or_symbol_runs(text, words); };
  if (type == "Metaspace") return metaspace(spec, where);
  if (type == "Punctuation") {  // each punctuation character, as BERT counts them
    const std::string behavior = read_behavior(spec, "Isolated", where);
    return [behavior](const std::string& text, bool, std::vector<std::string>& words) {
      split_by_character(text, u::is_punctuation, behavior, words);
    };
  }
  if (type == "Digits") {  // numeric characters (Nd, Nl, No): each alone, or runs of them
    const std::string behavior = spec.value("individual_digits", false) ? "Isolated" : "Contiguous";
    return [behavior](const std::string& text, bool, std::vector<std::string>& words) {
      split_by_character(text, is_numeric, behavior, words);
    };
  }
  if (type == "Split") return split(spec, where);
  if (type == "CharDelimiterSplit") {  // on one character, which is dropped
    const auto& given = field(spec, "delimiter", where + "'s CharDelimiterSplit");
    const auto delimiter = given.is_string() ? u::code_points(given.get<std::string>()) : std::vector<char32_t>();
    if (delimiter.size() != 1)
      throw Error(fmt::format("tokenizer: {}: CharDelimiterSplit's delimiter is one character, got {}", where,
                              spec["delimiter"].dump()));
    return [c = delimiter[0]](const std::string& text, bool, std::vector<std::string>& words) {
      split_by_character(text, [c](char32_t each) { return each == c; }, "Removed", words);
    };
  }
  if (type == "Sequence") {
    std::vector<PreTokenizer> steps;
    for (auto& each : field(spec, "pretokenizers", where + "'s Sequence pre_tokenizer"))
      steps.push_back(make_pre_tokenizer(each, where));
    return [steps](const std::string& text, bool at_start, std::vector<std::string>& words) {
      std::vector<std::string> current{text}, next;
      for (auto& step : steps) {
        next.clear();
        for (size_t i = 0; i < current.size(); ++i) step(current[i], at_start && i == 0, next);
        current.swap(next);
      }
      for (auto& piece : current) words.push_back(std::move(piece));
    };
  }
  throw Error(fmt::format("tokenizer: {}: pre_tokenizer {} is not read yet for this model (read: BertPreTokenizer, "
                          "Whitespace, WhitespaceSplit, Split, CharDelimiterSplit, Metaspace, Punctuation, Digits, Sequence)", where,
                          type.empty() ? spec.dump().substr(0, 80) : type));
}

}  // namespace slapo::text
