// Rotary position embeddings as transformers' rope_utils computes their frequencies: the default,
// linear, dynamic NTK and llama3 scalings, from either config form (4.x: rope_theta + rope_scaling;
// 5.x: rope_parameters). Other rope types are refused by name, never silently run as the default.
#pragma once

#include <torch/torch.h>

#include <string>

#include "models/config.h"

namespace slapo {

struct RopeScaling {
  std::string type = "default";  // default | linear | dynamic | llama3
  double theta = 10000.0;
  double factor = 1.0;
  double low_freq_factor = 1.0, high_freq_factor = 4.0;  // llama3
  int64_t original_max_positions = 0;                      // llama3, dynamic
  std::string describe() const;
};

/// The RoPE settings of a LLaMA-shaped config; errors name the field, its value and what is supported.
RopeScaling rope_from_config(const ModelConfig& c);

/// inv_freq [head_dim / 2] (float32) for sequences of `seq_len` positions (dynamic NTK depends on it).
at::Tensor rope_inv_freq(const RopeScaling& r, int64_t head_dim, int64_t seq_len, const at::TensorOptions& opts);

}  // namespace slapo
