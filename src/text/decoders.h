// tokenizer.json's decoder: tokens back to text, as a chain of steps over the token strings joined
// at the end (Hugging Face's decode_chain). Read: WordPiece, Metaspace, Replace (a string or a
// regex), ByteFallback, Fuse, Strip, CTC, BPEDecoder, Sequence of them, none (tokens joined by
// spaces); anything else is refused by name.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace slapo::text {

class Decoder {
 public:
  /// The decoder `spec` describes (null: none); `where` names the file in errors.
  Decoder(const nlohmann::json& spec, const std::string& where);
  Decoder() = default;

  /// A token after the chain's leading steps that map each token alone (Replace, Strip, Metaspace,
  /// WordPiece; the first token of a text its own way): the same for every occurrence, so a tokenizer
  /// computes both forms once per vocabulary entry.
  std::string token_form(std::string token, bool first) const;
  /// The text of tokens already in token_form: the rest of the chain, joined.
  std::string decode(std::vector<std::string> tokens) const;

 private:
  struct Step {
    std::function<void(std::vector<std::string>&)> on_list;
    std::function<std::string(std::string)> on_token, on_first;  // set for the steps that map each token alone
  };
  std::vector<Step> steps_;
  size_t leading_ = 0;         // how many steps token_form applies
  bool join_spaces_ = true;    // no decoder: tokens joined by spaces
};

}  // namespace slapo::text
