// slapo-lua profile-device: measures this machine's device (the CPU, or a CUDA GPU) into the
// format of stdlib/devices/h100.json, so the planner plans for what it measured.
#pragma once

#include <nlohmann/json.hpp>

#include <functional>
#include <string>

namespace slapo::plan {

struct ProfileOptions {
  std::string device = "cpu";  ///< "cpu" or "cuda"
  int threads = 0;             ///< CPU threads (0: LibTorch's default)
  bool quick = false;          ///< fewer, smaller shapes and shorter timing (tests)
};

/// {device, torch, memory_bytes, matmul: [{dtype, m, k, n, s, tflops}], attention: [...],
///  layer: [...], copy_GBps, links: {...}}: every figure measured now, except the links, which
/// say what is assumed for them.
nlohmann::json profile_device(const ProfileOptions& options);

/// Mean seconds of fn over repetitions filling `budget` seconds, after one warm-up call; a CUDA
/// device is synchronised around the timing.
double time_of(const std::function<void()>& fn, double budget, bool cuda = false);

}  // namespace slapo::plan
