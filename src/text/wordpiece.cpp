// WordPiece as Hugging Face's tokenizers (Rust) runs it: longest match first, by characters.
#include "text/wordpiece.h"

#include <fmt/format.h>

#include "core/error.h"
#include "text/subword_model.h"

namespace slapo::text {

namespace {

bool continuation_byte(char c) { return (static_cast<unsigned char>(c) & 0xC0) == 0x80; }

}  // namespace

WordPiece::WordPiece(const nlohmann::json& model, const std::string& where) {
  vocab_ = read_vocab(model, where);
  prefix_ = model.value("continuing_subword_prefix", "##");
  max_chars_ = model.value("max_input_chars_per_word", size_t{100});
  const std::string unk = model.value("unk_token", "[UNK]");
  auto found = vocab_.find(unk);
  if (found == vocab_.end())
    throw Error(fmt::format("tokenizer: {}: WordPiece's unk_token '{}' is not in its vocabulary", where, unk));
  unk_ = found->second;
}

void WordPiece::tokenize(const std::string& word, std::vector<int64_t>& out) const {
  size_t chars = 0;
  for (char c : word) chars += !continuation_byte(c);
  if (chars > max_chars_) {
    out.push_back(unk_);
    return;
  }
  const size_t first = out.size();
  std::string piece;
  for (size_t start = 0; start < word.size();) {
    int64_t id = -1;
    size_t end = word.size();
    for (; end > start; --end) {
      if (end < word.size() && continuation_byte(word[end])) continue;  // ends on a character's boundary
      piece.assign(start > 0 ? prefix_ : std::string());
      piece.append(word, start, end - start);
      if (auto found = vocab_.find(piece); found != vocab_.end()) {
        id = found->second;
        break;
      }
    }
    if (id < 0) {  // a part no piece covers: the whole word is unknown
      out.resize(first);
      out.push_back(unk_);
      return;
    }
    out.push_back(id);
    start = end;
  }
}

}  // namespace slapo::text
