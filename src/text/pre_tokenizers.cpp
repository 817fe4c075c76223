// tokenizer.json's pre-tokenizers, each as Hugging Face's tokenizers (Rust) splits.
#include "text/pre_tokenizers.h"

#include <fmt/format.h>

#include "core/error.h"
#include "text/json_fields.h"
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

}  // namespace

PreTokenizer make_pre_tokenizer(const nlohmann::json& spec, const std::string& where) {
  if (spec.is_null())
    return [](const std::string& text, std::vector<std::string>& words) {
      if (!text.empty()) words.push_back(text);
    };
  const std::string type = spec.is_object() ? spec.value("type", "") : "";
  if (type == "BertPreTokenizer")
    return [](const std::string& text, std::vector<std::string>& words) {
      split_by_class(text, words, u::is_whitespace, u::is_punctuation);
    };
  if (type == "WhitespaceSplit")
    return [](const std::string& text, std::vector<std::string>& words) {
      split_by_class(text, words, u::is_whitespace, [](char32_t) { return false; });
    };
  if (type == "Whitespace") return word_or_symbol_runs;
  if (type == "Sequence") {
    std::vector<PreTokenizer> steps;
    for (auto& each : field(spec, "pretokenizers", where + "'s Sequence pre_tokenizer"))
      steps.push_back(make_pre_tokenizer(each, where));
    return [steps](const std::string& text, std::vector<std::string>& words) {
      std::vector<std::string> current{text}, next;
      for (auto& step : steps) {
        next.clear();
        for (auto& piece : current) step(piece, next);
        current.swap(next);
      }
      for (auto& piece : current) words.push_back(std::move(piece));
    };
  }
  throw Error(fmt::format("tokenizer: {}: pre_tokenizer {} is not read yet for this model (read: BertPreTokenizer, "
                          "Whitespace, WhitespaceSplit, Sequence)", where,
                          type.empty() ? spec.dump().substr(0, 80) : type));
}

}  // namespace slapo::text
