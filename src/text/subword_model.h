// A tokenizer.json model as the pipeline runs it: one pre-tokenized word in, its ids out.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

namespace slapo::text {

class SubwordModel {
 public:
  virtual ~SubwordModel() = default;
  /// Appends the ids of one word.
  virtual void tokenize(const std::string& word, std::vector<int64_t>& out) const = 0;
  /// token -> id
  virtual const std::unordered_map<std::string, int64_t>& vocab() const = 0;
};

/// model.vocab: each token's id; raises naming `where` when it is not an object of ids from 0.
std::unordered_map<std::string, int64_t> read_vocab(const nlohmann::json& model, const std::string& where);

}  // namespace slapo::text
