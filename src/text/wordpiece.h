// tokenizer.json's WordPiece model (BERT): each pre-tokenized word split greedily into the longest
// vocabulary pieces from its start, pieces after the first carrying the continuing prefix ("##");
// a word with a part no piece covers, or longer than max_input_chars_per_word, is the unknown token.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "text/subword_model.h"

namespace slapo::text {

class WordPiece : public SubwordModel {
 public:
  /// Reads model {"type": "WordPiece", "vocab", "unk_token", "continuing_subword_prefix",
  /// "max_input_chars_per_word"}; raises naming `where` and the field.
  WordPiece(const nlohmann::json& model, const std::string& where);

  /// Appends the ids of one word.
  void tokenize(const std::string& word, std::vector<int64_t>& out) const override;
  const std::unordered_map<std::string, int64_t>& vocab() const override { return vocab_; }

 private:
  std::unordered_map<std::string, int64_t> vocab_;
  std::string prefix_;
  int64_t unk_ = 0;
  size_t max_chars_ = 100;
};

}  // namespace slapo::text
