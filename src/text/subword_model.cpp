// What every tokenizer.json model reads alike: its vocabulary.
#include "text/subword_model.h"

#include <fmt/format.h>

#include "core/error.h"
#include "text/json_fields.h"

namespace slapo::text {

std::unordered_map<std::string, int64_t> read_vocab(const nlohmann::json& model, const std::string& where) {
  const auto& vocab = field(model, "vocab", where + "'s model");
  if (!vocab.is_object() || vocab.empty())
    throw Error(fmt::format("tokenizer: {}: model.vocab must map each token to its id (a JSON object)", where));
  std::unordered_map<std::string, int64_t> ids;
  ids.reserve(vocab.size());
  for (auto& [token, id] : vocab.items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0)
      throw Error(fmt::format("tokenizer: {}: token '{}' has id {}; ids are numbers from 0", where, token, id.dump()));
    ids.emplace(token, id.get<int64_t>());
  }
  return ids;
}

}  // namespace slapo::text
