// Ulysses attention: two differentiable all-to-alls around blockwise attention on one rank.
#include "distributed/ulysses_attention.h"

#include <fmt/format.h>

#include <vector>

#include "core/error.h"
#include "distributed/autograd_collectives.h"
#include "distributed/ring_attention.h"

namespace slapo::dist {

namespace {

// [B, H, s, D] of this rank's tokens -> [B, H / N, N s, D]: head group r goes to rank r, and rank
// r's tokens of this rank's head group arrive, laid out in rank order.
at::Tensor heads_to_tokens(const at::Tensor& x, const std::shared_ptr<Group>& group) {
  const int64_t n = group->size(), b = x.size(0), h = x.size(1), s = x.size(2), d = x.size(3);
  std::vector<int64_t> rows(n, h / n);
  auto sent = all_to_all_rows(x.permute({1, 0, 2, 3}).contiguous(), rows, rows, group);  // [N * H/N, B, s, D]
  return sent.view({n, h / n, b, s, d}).permute({2, 1, 0, 3, 4}).reshape({b, h / n, n * s, d});
}

// The inverse: [B, H / N, N s, D] -> [B, H, s, D], rank r's tokens going home with this rank's heads.
at::Tensor tokens_to_heads(const at::Tensor& x, const std::shared_ptr<Group>& group) {
  const int64_t n = group->size(), b = x.size(0), h = x.size(1) * n, s = x.size(2) / n, d = x.size(3);
  std::vector<int64_t> rows(n, h / n);
  auto by_rank = x.view({b, h / n, n, s, d}).permute({2, 1, 0, 3, 4}).reshape({n * (h / n), b, s, d}).contiguous();
  return all_to_all_rows(by_rank, rows, rows, group).permute({1, 0, 2, 3});  // head groups in rank order: [B, H, s, D]
}

}  // namespace

at::Tensor ulysses_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& positions,
                             const std::shared_ptr<Group>& group, double scale, int64_t score_bytes, int64_t window,
                             const char* who, const at::Tensor& documents) {
  const int64_t n = group->size(), heads = q.size(1), kv_heads = k.size(1);
  if (heads % n != 0)
    throw Error(fmt::format("{}: all_to_all splits attention's heads over the {} ranks of {}; this rank's {} query heads "
                            "do not divide (a group size dividing {}, or method = \"ring\")",
                            who, n, group->describe(), heads, heads));
  at::Tensor keys = k, values = v;
  if (kv_heads % n != 0) {  // each rank's query heads need their own key/value heads
    keys = repeat_heads(k, heads / kv_heads);
    values = repeat_heads(v, heads / kv_heads);
  }
  // one exchange after another, in the same order on every rank
  auto q_all = heads_to_tokens(q, group);
  auto k_all = heads_to_tokens(keys, group);
  auto v_all = heads_to_tokens(values, group);
  auto out = blockwise_causal_attention(q_all, k_all, v_all, positions.reshape({-1}), scale, score_bytes, window,
                                        documents);
  return tokens_to_heads(out, group);
}

}  // namespace slapo::dist
