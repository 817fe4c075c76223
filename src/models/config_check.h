// What a config.json field means to the zoo: honoured (checked for type and range), harmless
// (tokenizer ids, generation settings, bookkeeping), or refused because the zoo would compute
// something other than transformers does. Unknown fields are reported in one warning.
#pragma once

#include <string>
#include <vector>

#include "models/config.h"

namespace slapo {

/// Checks every field of `config` (defaults already merged) for its model_type. Throws an Error
/// naming the field, its value and what is supported for a refused field or a value out of range
/// (a head count of 0, a dropout of 1.5, an epsilon of 0). Returns the fields it does not know.
std::vector<std::string> check_config_fields(const ModelConfig& config);

/// check_config_fields, with the unknown fields listed in one warning on stderr.
void check_config(const ModelConfig& config);

}  // namespace slapo
