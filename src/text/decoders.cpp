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
    token = Replacement{from, to}.apply(std::move(token));
  return token;
}

// WordPiece: a continuation loses its prefix, any other token after the first gets a space
ListStep word_piece(const nlohmann::json& spec) {
  const std::string prefix = spec.value("prefix", "##");
  const bool tidy = spec.value("cleanup", true);
  return [prefix, tidy](std::vector<std::string>& tokens) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& token = tokens[i];
      if (i > 0) {
        if (token.compare(0, prefix.size(), prefix) == 0) token.erase(0, prefix.size());
        else token.insert(token.begin(), ' ');
      }
      if (tidy && may_need_cleanup(token, 0)) token = cleanup(std::move(token));
    }
  };
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

// Metaspace: the replacement back to spaces, the first token's dropped unless prepend_scheme is never
ListStep metaspace(const nlohmann::json& spec, const std::string& where) {
  const std::string replacement = spec.value("replacement", "\xE2\x96\x81");
  if (replacement.empty()) throw Error(fmt::format("tokenizer: {}: Metaspace's replacement is empty", where));
  std::string scheme = spec.value("prepend_scheme", "");
  if (scheme.empty()) scheme = spec.value("add_prefix_space", true) ? "always" : "never";
  const bool drop_first = scheme != "never";
  return [replacement, drop_first](std::vector<std::string>& tokens) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string& token = tokens[i];
      if (token.find(replacement) == std::string::npos) continue;
      std::string out;
      for (size_t at = 0; at < token.size();) {
        if (token.compare(at, replacement.size(), replacement) == 0) {
          if (!(i == 0 && drop_first)) out.push_back(' ');
          at += replacement.size();
        } else {
          out.push_back(token[at++]);
        }
      }
      token = std::move(out);
    }
  };
}

using TokenMap = std::function<std::string(std::string)>;

// The steps of `spec`, a Sequence's flattened: {list step, token map where it maps each token alone}
void add_steps(const nlohmann::json& spec, const std::string& where,
               std::vector<std::pair<ListStep, TokenMap>>& steps) {
  const std::string type = spec.is_object() ? spec.value("type", "") : "";
  auto per_token = [&](TokenMap map) {
    steps.emplace_back([map](std::vector<std::string>& tokens) {
      for (auto& token : tokens) token = map(std::move(token));
    }, map);
  };
  if (type == "WordPiece") return steps.emplace_back(word_piece(spec), nullptr), void();
  if (type == "ByteFallback") return steps.emplace_back(byte_fallback, nullptr), void();
  if (type == "Metaspace") return steps.emplace_back(metaspace(spec, where), nullptr), void();
  if (type == "Fuse")
    return steps.emplace_back([](std::vector<std::string>& tokens) {
      std::string all;
      for (auto& token : tokens) all += token;
      tokens.assign(1, std::move(all));
    }, nullptr), void();
  if (type == "Strip") return per_token(strip(spec, where));
  if (type == "Replace") {
    Replacement r = read_replace(spec, where, "decoder");
    return per_token([r](std::string token) { return r.apply(std::move(token)); });
  }
  if (type == "Sequence") {
    for (auto& each : field(spec, "decoders", where + "'s Sequence decoder")) add_steps(each, where, steps);
    return;
  }
  throw Error(fmt::format("tokenizer: {}: decoder {} is not read yet for this model (read: WordPiece, Metaspace, "
                          "Replace, ByteFallback, Fuse, Strip, Sequence, none)", where,
                          type.empty() ? spec.dump().substr(0, 80) : type));
}

}  // namespace

Decoder::Decoder(const nlohmann::json& spec, const std::string& where) {
  if (spec.is_null()) return;
  join_spaces_ = false;
  std::vector<std::pair<ListStep, TokenMap>> steps;
  add_steps(spec, where, steps);
  for (auto& [on_list, on_token] : steps) steps_.push_back(Step{on_list, on_token});
  while (leading_ < steps_.size() && steps_[leading_].on_token) ++leading_;
}

std::string Decoder::token_form(std::string token) const {
  for (size_t i = 0; i < leading_; ++i) token = steps_[i].on_token(std::move(token));
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
