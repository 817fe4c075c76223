#include "distributed/attention_pieces.h"

#include <algorithm>
#include <cmath>

namespace slapo::dist {

std::vector<Run> runs_of(const at::Tensor& host_positions) {
  auto pos = host_positions.accessor<int64_t, 1>();
  std::vector<Run> runs;
  for (int64_t i = 0; i < pos.size(0); ++i) {
    if (!runs.empty() && pos[i] == runs.back().first + runs.back().length) ++runs.back().length;
    else runs.push_back({i, 1, pos[i]});
  }
  return runs;
}

DocumentSpans::DocumentSpans(const at::Tensor& documents) {
  if (!documents.defined()) return;
  host_ = documents.to(at::kCPU, at::kLong).contiguous();
  sorted_ = host_.size(1) < 2 || host_.diff(1, 1).ge(0).all().item<bool>();
}

DocumentSpans::Shared DocumentSpans::between(int64_t q_first, int64_t q_last, int64_t k_first, int64_t k_last) const {
  if (!host_.defined()) return Shared::kOneDocument;
  if (!sorted_) return Shared::kSome;
  auto ids = host_.accessor<int64_t, 2>();
  bool any = false, one = true;
  for (int64_t r = 0; r < ids.size(0); ++r) {
    const int64_t q_lo = ids[r][q_first], q_hi = ids[r][q_last], k_lo = ids[r][k_first], k_hi = ids[r][k_last];
    any = any || (q_lo <= k_hi && k_lo <= q_hi);
    one = one && q_lo == q_hi && k_lo == k_hi && q_lo == k_lo;
  }
  return !any ? Shared::kNone : one ? Shared::kOneDocument : Shared::kSome;
}

std::vector<Piece> pieces_of(const std::vector<Run>& queries, const std::vector<Run>& key_runs, int64_t side,
                             int64_t window, const DocumentSpans& documents) {
  std::vector<Run> keys;  // each run in parts of at most `side` keys
  for (auto& run : key_runs)
    for (int64_t at = 0; at < run.length; at += side)
      keys.push_back({run.start + at, std::min(side, run.length - at), run.first + at});
  std::vector<Piece> out;
  for (auto& q : queries)
    for (int64_t row = q.start; row < q.start + q.length; row += side) {
      const int64_t length = std::min(side, q.start + q.length - row), first = q.first + (row - q.start);
      const int64_t last = first + length - 1;
      for (auto& k : keys) {
        const int64_t k_last = k.first + k.length - 1;
        if (k.first > last) continue;                          // every key after every query
        if (window > 0 && k_last <= first - window) continue;  // every key before every query's window
        auto shared = documents.between(first, last, k.first, k_last);
        if (shared == DocumentSpans::Shared::kNone) continue;  // every key in another document
        out.push_back({row, length, first, k, k_last > first || (window > 0 && k.first <= last - window),
                       shared == DocumentSpans::Shared::kSome});
      }
    }
  return out;
}

int64_t piece_side(const at::Tensor& q, int64_t score_bytes) {
  const double entries = static_cast<double>(score_bytes) / (4.0 * static_cast<double>(q.size(0) * q.size(1)));
  return std::max<int64_t>(1, static_cast<int64_t>(std::sqrt(std::max(entries, 1.0))));
}

}  // namespace slapo::dist
