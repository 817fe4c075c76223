// tokenizer.json's decoders, as Hugging Face's tokenizers (Rust) decode.
#include "text/decoders.h"

#include <fmt/format.h>

#include "core/error.h"

namespace slapo::text {

namespace {

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = 0; (at = text.find(from, at)) != std::string::npos; at += to.size()) text.replace(at, from.size(), to);
  return text;
}

// WordPiece's cleanup of English spacing before punctuation and in contractions
// Whether cleanup can change `piece`: each pattern is a space and then . ? ! , ' n or d
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

std::string cleanup(std::string token) {
  for (auto [from, to] : {std::pair{" .", "."}, {" ?", "?"}, {" !", "!"}, {" ,", ","}, {" ' ", "'"}, {" n't", "n't"},
                          {" 'm", "'m"}, {" do not", " don't"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}})
    token = replace_all(std::move(token), from, to);
  return token;
}

}  // namespace

Decoder make_decoder(const nlohmann::json& spec, const std::string& where) {
  if (spec.is_null())
    return [](const std::vector<std::string>& tokens) {
      std::string out;
      for (size_t i = 0; i < tokens.size(); ++i) out += (i ? " " : "") + tokens[i];
      return out;
    };
  const std::string type = spec.is_object() ? spec.value("type", "") : "";
  if (type == "WordPiece") {
    const std::string prefix = spec.value("prefix", "##");
    const bool tidy = spec.value("cleanup", true);
    return [prefix, tidy](const std::vector<std::string>& tokens) {
      std::string out;
      out.reserve(tokens.size() * 6);
      for (size_t i = 0; i < tokens.size(); ++i) {
        const std::string& token = tokens[i];
        const bool continues = i > 0 && token.compare(0, prefix.size(), prefix) == 0;
        const size_t mark = out.size();
        if (i > 0 && !continues) out.push_back(' ');
        out.append(token, continues ? prefix.size() : 0, std::string::npos);
        if (tidy && may_need_cleanup(out, mark)) {  // cleaned token by token, as Hugging Face's does
          std::string piece = cleanup(out.substr(mark));
          out.resize(mark);
          out += piece;
        }
      }
      return out;
    };
  }
  throw Error(fmt::format("tokenizer: {}: decoder {} is not read yet for this model (read: WordPiece, none)", where,
                          type.empty() ? spec.dump().substr(0, 80) : type));
}

}  // namespace slapo::text
