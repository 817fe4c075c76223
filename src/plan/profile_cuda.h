// The GPU's rows of slapo-lua profile-device (src/plan/profile_cuda.cpp).
#pragma once

#include <nlohmann/json.hpp>

namespace slapo::plan {

/// Measures the current CUDA device into `out`: its name and memory (CUDA builds), matmul,
/// attention, layer and copy_GBps rows at stdlib/devices/h100.json's shapes (fewer with `quick`).
void profile_cuda(nlohmann::json& out, bool quick);

}  // namespace slapo::plan
