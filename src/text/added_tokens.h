// A tokenizer.json's added tokens as the text is split at them: leftmost, then longest, as Hugging
// Face's tokenizers match them, lstrip and rstrip taking the white space beside a match with it.
// Byte-level BPE and the pipeline of stages both split this way.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
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
  /// Once every token is added: the longer of two that start at one place is taken.
  void sort_longest_first();
  bool empty() const { return longest_first_.empty(); }

  /// Splits `text` at the tokens: `plain` gets the text between matches and where it starts,
  /// `added` each match's id, in order.
  void split(const std::string& text, const std::function<void(const std::string&, size_t)>& plain,
             const std::function<void(int64_t)>& added) const;

 private:
  std::vector<AddedToken> longest_first_;
  bool starts_one_[256] = {};  // the bytes a token starts with
};

}  // namespace slapo::text
