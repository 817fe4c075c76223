// All-reduces of growing sizes, timed on every rank (the same repetitions everywhere, so no rank
// waits on a collective the others never start), the slowest rank's time kept.
#include "distributed/link_profile.h"

#include <algorithm>
#include <chrono>

#include "distributed/group.h"

namespace slapo::dist {

LinkMeasurement measure_all_reduce_links(Group& group, bool quick) {
  LinkMeasurement out;
  const int n = group.size();
  if (n < 2) return out;
  struct Size {
    int64_t floats;
    int reps;
  };
  const std::vector<Size> sizes = quick ? std::vector<Size>{{256, 10}, {1 << 22, 3}}
                                        : std::vector<Size>{{256, 50}, {1 << 14, 20}, {1 << 18, 10}, {1 << 22, 5}};
  for (auto [floats, reps] : sizes) {
    auto t = torch::ones({floats});
    group.all_reduce(t, "profile-device");  // warm-up: connections, buffers
    group.barrier();
    auto start = std::chrono::steady_clock::now();
    for (int r = 0; r < reps; ++r) group.all_reduce(t, "profile-device");
    double mine = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
    auto slowest = torch::tensor({mine}, torch::kFloat64);
    auto all = group.all_gather(slowest, 0, "profile-device");
    out.rows.push_back({4.0 * double(floats), all.max().item<double>()});
  }
  const double steps = 2.0 * (n - 1);
  out.latency_s = out.rows.front().seconds / steps;
  const auto& big = out.rows.back();
  double transfer = std::max(big.seconds - steps * out.latency_s, 1e-9);
  out.bandwidth_Bps = steps / n * big.bytes / transfer;
  return out;
}

}  // namespace slapo::dist
