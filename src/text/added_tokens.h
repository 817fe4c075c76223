// A tokenizer.json's added tokens as the text is split at them: leftmost, then longest, as Hugging
// Face's tokenizers match them, lstrip and rstrip taking the white space beside a match with it.
// Byte-level BPE and the pipeline of stages both split this way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace slapo::text {

struct AddedToken {
  std::string content;  // as matched: normalized first when the token is `normalized`
  int64_t id = 0;
  bool lstrip = false, rstrip = false;
};

class AddedTokens {
 public:
  void add(AddedToken token);
  /// Once every token is added: the longer of two that start at one place is taken (and the
  /// tokens are indexed for split).
  void sort_longest_first();
  bool empty() const { return longest_first_.empty(); }

  /// Splits `text` at the tokens: `plain` gets the text between matches and where it starts,
  /// `added` each match's id, in order.
  void split(const std::string& text, const std::function<void(const std::string&, size_t)>& plain,
             const std::function<void(int64_t)>& added) const;

 private:
  /// The longest token at `text[at]`, or null.
  const AddedToken* match_at(const std::string& text, size_t at) const;

  std::vector<AddedToken> longest_first_;
  bool starts_one_[256] = {};  // the bytes a token starts with
  // The tokens in a trie over their bytes: the longest at a position is one walk along the text, not
  // a comparison per token (Gemma 3 has 6,415, most after a '<'). A node's children are few but the
  // root's, which has a slot per byte.
  struct Node {
    int token = -1;  // index into longest_first_ of the token ending here
    std::vector<std::pair<unsigned char, int>> children;
  };
  std::vector<Node> trie_;
  std::vector<int> root_children_ = std::vector<int>(256, -1);
};

}  // namespace slapo::text
