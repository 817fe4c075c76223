// libFuzzer target: any bytes as config.json. Parsing (nesting limited), the class defaults, the
// field checks and the RoPE settings must accept the config or throw; a crash, a sanitizer report,
// a hang or an unexpected exception type is a bug.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "core/error.h"
#include "io/json_file.h"
#include "models/config.h"
#include "models/config_check.h"
#include "models/rope.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  nlohmann::json fields;
  try {
    fields = slapo::parse_json_limited(data, data + size);
  } catch (const std::exception&) {  // malformed or too deep: from_pretrained reports it
    return 0;
  }
  if (!fields.is_object() || !fields.contains("model_type") || !fields["model_type"].is_string()) return 0;
  try {
    slapo::ModelConfig config(fields);
    auto full = config.with_defaults(config.model_type());
    slapo::check_config_fields(full);
    const std::string type = full.model_type();
    if (type == "llama" || type == "qwen2" || type == "mistral") {
      auto rope = slapo::rope_from_config(full);
      int64_t head_dim = full.has("head_dim") ? full.integer("head_dim")
                                              : full.integer("hidden_size") / full.integer("num_attention_heads");
      if (head_dim >= 2 && head_dim <= 4096 && head_dim % 2 == 0)
        (void)slapo::rope_inv_freq(rope, head_dim, 16, at::TensorOptions()).sum().item<double>();
    }
  } catch (const slapo::Error&) {
  }
  return 0;
}
