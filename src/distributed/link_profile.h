// The links between ranks as the planner's cost model sees them (alpha-beta), measured with real
// all-reduces over a group: profile-device --ranks R measures them among its R processes.
#pragma once

#include <vector>

namespace slapo::dist {

class Group;

struct LinkMeasurement {
  double latency_s = 0;       ///< alpha: per step of the ring
  double bandwidth_Bps = 0;   ///< beta: bytes per second over a link
  struct Row {
    double bytes, seconds;  ///< one float32 all-reduce of `bytes`, the slowest rank's mean
  };
  std::vector<Row> rows;
};

/// Times float32 all-reduces of growing sizes over `group` and fits the cost model's ring
/// formula t = 2 (n - 1) alpha + 2 (n - 1) / n x bytes / beta: alpha from the smallest size, beta
/// from the largest. Every rank of the group calls it with the same `quick`.
LinkMeasurement measure_all_reduce_links(Group& group, bool quick);

/// How much of a collective hides behind compute that runs while it is in flight, as fully_shard's
/// prefetch runs them: a gather of each rank's slice alone, matmuls of about its time alone, then
/// the gather started and the matmuls run before waiting for it.
struct OverlapMeasurement {
  double gather_s = 0, compute_s = 0, both_s = 0;  ///< the median round's means, on the rank that hid the least
  /// (gather + compute - both) / the shorter of the two, in [0, 1]: 0 when they take turns, 1
  /// when the shorter hides entirely behind the longer; the least over the group's ranks
  double overlap = 0;
};
OverlapMeasurement measure_gather_overlap(Group& group, bool quick);

}  // namespace slapo::dist
