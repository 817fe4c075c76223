// All-reduces of growing sizes, timed on every rank (the same repetitions everywhere, so no rank
// waits on a collective the others never start), the slowest rank's time kept; and a gather run
// beside compute, for how much of it hides.
#include "distributed/link_profile.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

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

namespace {
// Mean seconds of `reps` calls of fn, after the group's ranks meet, so each phase starts together.
template <typename Fn>
double timed_together(Group& group, int reps, Fn&& fn) {
  group.barrier();
  auto start = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r) fn();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() / reps;
}
}  // namespace

OverlapMeasurement measure_gather_overlap(Group& group, bool quick) {
  OverlapMeasurement out;
  const int n = group.size();
  if (n < 2) return out;
  const int rounds = quick ? 3 : 9, reps = quick ? 2 : 4;
  const int64_t slice_floats = quick ? (1 << 18) : (1 << 21);  // 1 or 8 MiB a rank: a layer's slice
  auto slice = torch::ones({slice_floats}), whole = torch::empty({slice_floats * n});
  auto gather = [&] { return group.all_gather_into_async(whole, slice, "profile-device"); };
  gather()();  // warm-up: connections, buffers
  const double gather_s = timed_together(group, reps, [&] { gather()(); });
  // matmuls of about the gather's time (each rank counts its own)
  auto a = torch::randn({256, 256}), b = torch::randn({256, 256}), c = torch::empty({256, 256});
  at::mm_out(c, a, b);
  const double one = timed_together(group, 10, [&] { at::mm_out(c, a, b); });
  const int count = std::max(1, static_cast<int>(std::lround(gather_s / std::max(one, 1e-9))));
  auto compute = [&] {
    for (int i = 0; i < count; ++i) at::mm_out(c, a, b);
  };
  // rounds of the three, side by side, so a machine that drifts between minutes drifts for all
  // three alike; each round's overlap, and the median round kept
  std::vector<OverlapMeasurement> measured;
  for (int r = 0; r < rounds; ++r) {
    OverlapMeasurement m;
    m.gather_s = timed_together(group, reps, [&] { gather()(); });
    m.compute_s = timed_together(group, reps, compute);
    m.both_s = timed_together(group, reps, [&] {
      auto wait = gather();
      compute();
      wait();
    });
    const double shorter = std::max(std::min(m.gather_s, m.compute_s), 1e-12);
    m.overlap = std::clamp((m.gather_s + m.compute_s - m.both_s) / shorter, 0.0, 1.0);
    measured.push_back(m);
  }
  std::sort(measured.begin(), measured.end(), [](auto& x, auto& y) { return x.overlap < y.overlap; });
  out = measured[measured.size() / 2];
  // the rank that hid the least speaks for the group: a prefetch waits for its slowest peer
  auto mine = torch::tensor({out.overlap, out.gather_s, out.compute_s, out.both_s}, torch::kFloat64);
  auto all = group.all_gather(mine, 0, "profile-device").reshape({n, 4});
  auto least = all.select(1, 0).argmin().item<int64_t>();
  out.overlap = all[least][0].item<double>(), out.gather_s = all[least][1].item<double>();
  out.compute_s = all[least][2].item<double>(), out.both_s = all[least][3].item<double>();
  return out;
}

}  // namespace slapo::dist
