// tokenizer.json's decoders, as Hugging Face's tokenizers (Rust) decode: each step rewrites the list
// of token strings, and the list is joined at the end.
#include "text/decoders.h"

#include <algorithm>

#include <fmt/format.h>

#include "core/error.h"
#include "text/json_fields.h"
#include "text/replace_stage.h"
#include "text/unicode_text.h"

namespace slapo::text {

namespace {

using ListStep = std::function<void(std::vector<std::string>&)>;  // a step over the whole list
using TokenMap = std::function<std::string(std::string)>;         // a step on each token alone

// Whether cleanup can change `piece` from `from` on: each pattern is a space and then . ? ! , ' n or d
bool may_need_cleanup(const std::string& piece, size_t from) {
  for (size_t at = piece.find(' ', from); at != std::string::npos && at + 1 < piece.size(); at = piece.find(' ', at + 1))
    switch (piece[at + 1]) {
      case '.': case '?': case '!': case ',': case '\'': case 'n': case 'd':
        return true;
      default:
        break;
    }
  return false;
}

// WordPiece's cleanup of English spacing before punctuation and in contractions
std::string cleanup(std::string token) {
  for (auto [from, to] : {std::pair{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
                          {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}})
    token = Replacement{from, to, nullptr}.apply(std::move(token));
  return token;
}

// WordPiece: after the first token, a continuation loses its prefix and any other token gets a
// space; every token cleaned up
std::pair<TokenMap, TokenMap> word_piece(const nlohmann::json& spec) {
  const std::string prefix = spec.value("prefix", "##");
  const bool tidy = spec.value("cleanup", true);
  auto tidied = [tidy](std::string token) {
    return tidy && may_need_cleanup(token, 0) ? cleanup(std::move(token)) : token;
  };
  auto later = [prefix, tidied](std::string token) {
    if (token.compare(0, prefix.size(), prefix) == 0) token.erase(0, prefix.size());
    else token.insert(token.begin(), ' ');
    return tidied(std::move(token));
  };
  return {later, tidied};
}

// ByteFallback: runs of <0xXX> tokens become their bytes' text, or one U+FFFD a byte when not UTF-8
void byte_fallback(std::vector<std::string>& tokens) {
  auto is_byte = [](const std::string& t) { return t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>'; };
  if (std::none_of(tokens.begin(), tokens.end(), is_byte)) return;
  std::vector<std::string> out;
  out.reserve(tokens.size());
  std::string bytes;
  size_t run = 0;
  auto flush = [&] {
    if (!run) return;
    if (unicode::is_valid_utf8(bytes)) out.push_back(bytes);
    else
      for (size_t k = 0; k < run; ++k) out.emplace_back("\xEF\xBF\xBD");
    bytes.clear();
    run = 0;
  };
  auto hex = [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F'); };
  for (auto& token : tokens) {
    if (token.size() == 6 && token.compare(0, 3, "<0x") == 0 && token[5] == '>' && hex(token[3]) && hex(token[4])) {
      bytes.push_back(static_cast<char>(std::stoi(token.substr(3, 2), nullptr, 16)));
      ++run;
      continue;
    }
    flush();
    out.push_back(std::move(token));
  }
  flush();
  tokens = std::move(out);
}

// Strip: up to `start` leading and `stop` trailing `content` characters off a token
std::function<std::string(std::string)> strip(const nlohmann::json& spec, const std::string& where) {
  const std::string content = field(spec, "content", where + "'s Strip decoder").get<std::string>();
  if (unicode::code_points(content).size() != 1)
    throw Error(fmt::format("tokenizer: {}: a Strip decoder's content is one character, got '{}'", where, content));
  const size_t start = spec.value("start", size_t{0}), stop = spec.value("stop", size_t{0});
  return [content, start, stop](std::string token) {
    size_t begin = 0, end = token.size();
    for (size_t k = 0; k < start && token.compare(begin, content.size(), content) == 0; ++k) begin += content.size();
    for (size_t k = 0; k < stop && end >= begin + content.size() &&
                       token.compare(end - content.size(), content.size(), content) == 0;
         ++k)
      end -= content.size();
    return begin > 0 || end < token.size() ? token.substr(begin, end - begin) : token;
  };
}

// Metaspace: the replacement back to spaces; the first token's dropped unless prepend_scheme is never
std::pair<TokenMap, TokenMap> metaspace(const nlohmann::json& spec, const std::string& where) {
  const std::string replacement = spec.value("replacement", "\xE2\x96\x81");
  if (replacement.empty()) throw Error(fmt::format("tokenizer: {}: Metaspace's replacement is empty", where));
  std::string scheme = spec.value("prepend_scheme", "");
  if (scheme.empty()) scheme = spec.value("add_prefix_space", true) ? "always" : "never";
  const Replacement spaced{replacement, " ", nullptr}, dropped{replacement, "", nullptr};
  TokenMap later = [spaced](std::string token) { return spaced.apply(std::move(token)); };
  if (scheme == "never") return {later, later};
  return {later, [dropped](std::string token) { return dropped.apply(std::move(token)); }};
}

// CTC's (wav2vec2's): repeated tokens as one, the pad token out, and with `cleanup` WordPiece's
// cleanup and the word delimiter as a space; tokens left empty dropped
ListStep ctc(const nlohmann::json& spec, const std::string& where) {
  const std::string pad = spec.value("pad_token", "<pad>"), delimiter = spec.value("word_delimiter_token", "|");
  const bool tidy = spec.value("cleanup", true);
  if (pad.empty() || (tidy && delimiter.empty()))
    throw Error(fmt::format("tokenizer: {}: CTC's pad_token and word_delimiter_token are tokens, got '{}' and '{}'",
                            where, pad, delimiter));
  const Replacement no_pad{pad, "", nullptr}, spaced{delimiter, " ", nullptr};
  return [=](std::vector<std::string>& tokens) {
    std::vector<std::string> out;
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i > 0 && tokens[i] == tokens[i - 1]) continue;
      std::string token = no_pad.apply(tokens[i]);
      if (tidy) token = spaced.apply(cleanup(std::move(token)));
      if (!token.empty()) out.push_back(std::move(token));
    }
    tokens.swap(out);
  };
}

// BPEDecoder's (the original BPE's end-of-word suffix): the suffix as a space, the last token's as
// nothing
ListStep bpe_suffix(const nlohmann::json& spec, const std::string& where) {
  const std::string suffix = spec.value("suffix", "</w>");
  if (suffix.empty()) throw Error(fmt::format("tokenizer: {}: BPEDecoder's suffix is empty", where));
  const Replacement spaced{suffix, " ", nullptr}, dropped{suffix, "", nullptr};
  return [=](std::vector<std::string>& tokens) {
    for (size_t i = 0; i < tokens.size(); ++i)
      tokens[i] = (i + 1 == tokens.size() ? dropped : spaced).apply(std::move(tokens[i]));
  };
}

struct StepSpec {
  ListStep on_list;
  TokenMap on_token, on_first;  // set where the step maps each token alone (the first its own way)
};

// A step that maps each token alone, the first token by `first`
StepSpec per_token(TokenMap later, TokenMap first) {
  return {[later, first](std::vector<std::string>& tokens) {
            for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = (i ? later : first)(std::move(tokens[i]));
          },
          later, first};
}

// The steps of `spec`, a Sequence's flattened
void add_steps(const nlohmann::json& spec, const std::string& where, std::vector<StepSpec>& steps) {
  const std::string type = spec.is_object() ? spec.value("type", "") : "";
  if (type == "WordPiece") {
    auto [later, first] = word_piece(spec);
    return steps.push_back(per_token(later, first));
  }
  if (type == "Metaspace") {
    auto [later, first] = metaspace(spec, where);
    return steps.push_back(per_token(later, first));
  }
  if (type == "ByteFallback") return steps.push_back({byte_fallback, nullptr, nullptr});
  if (type == "Fuse")
    return steps.push_back({[](std::vector<std::string>& tokens) {
                              std::string all;
                              for (auto& token : tokens) all += token;
                              tokens.assign(1, std::move(all));
                            }, nullptr, nullptr});
  if (type == "Strip") {
    TokenMap map = strip(spec, where);
    return steps.push_back(per_token(map, map));
  }
  if (type == "Replace") {
    Replacement r = read_replace(spec, where, "decoder");
    TokenMap map = [r](std::string token) { return r.apply(std::move(token)); };
    return steps.push_back(per_token(map, map));
  }
  if (type == "CTC") return steps.push_back({ctc(spec, where), nullptr, nullptr});
  if (type == "BPEDecoder") return steps.push_back({bpe_suffix(spec, where), nullptr, nullptr});
  if (type == "Sequence") {
    for (auto& each : field(spec, "decoders", where + "'s Sequence decoder")) add_steps(each, where, steps);
    return;
  }
  throw Error(fmt::format("tokenizer: {}: decoder {} is not read yet for this model (read: WordPiece, Metaspace, "
                          "Replace, ByteFallback, Fuse, Strip, CTC, BPEDecoder, Sequence, none)", where,
                          type.empty() ? spec.dump().substr(0, 80) : type));
}

}  // namespace

Decoder::Decoder(const nlohmann::json& spec, const std::string& where) {
  if (spec.is_null()) return;
  join_spaces_ = false;
  std::vector<StepSpec> steps;
  add_steps(spec, where, steps);
  for (auto& step : steps) steps_.push_back(Step{step.on_list, step.on_token, step.on_first});
  while (leading_ < steps_.size() && steps_[leading_].on_token) ++leading_;
}

std::string Decoder::token_form(std::string token, bool first) const {
  for (size_t i = 0; i < leading_; ++i) token = (first ? steps_[i].on_first : steps_[i].on_token)(std::move(token));
  return token;
}

std::string Decoder::decode(std::vector<std::string> tokens) const {
  for (size_t i = leading_; i < steps_.size(); ++i) steps_[i].on_list(tokens);
  std::string out;
  size_t size = 0;
  for (auto& token : tokens) size += token.size() + 1;
  out.reserve(size);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (join_spaces_ && i) out.push_back(' ');
    out += tokens[i];
  }
  return out;
}

}  // namespace slapo::text
