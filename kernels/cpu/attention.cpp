// Memory-efficient attention on CPU, FlashAttention's algorithm on tiles: for each tile of queries,
// the key/value tiles pass through an online softmax (running max and sum), every tile product a
// small BLAS matmul, so no Sq x Sk matrix is ever held (one tile of scores per task). Backward
// recomputes each tile's probabilities from the saved log-sum-exp.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "cpu/cpu_kernels.h"

namespace slapo::kernels::cpu {

namespace {

void check_shapes(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || q.size(0) != k.size(0) || q.size(1) != k.size(1) ||
      k.sizes() != v.sizes() || q.size(3) != k.size(3))
    throw Error(fmt::format("attention: expected q [B, H, Sq, D], k and v [B, H, Sk, D]; got [{}], [{}], [{}]",
                            fmt::join(q.sizes(), ", "), fmt::join(k.sizes(), ", "), fmt::join(v.sizes(), ", ")));
}

constexpr int64_t kQueryTile = 64, kKeyTile = 128;

// Keys a causal query row may see: j <= i + (Sk - Sq), as the zoo's additive mask. For the query
// tile [i0, i0 + tq): the keys any of its rows sees.
inline int64_t keys_for_tile(int64_t i0, int64_t tq, int64_t sq, int64_t sk, bool causal) {
  return causal ? std::min(sk, i0 + tq + (sk - sq)) : sk;
}

// Sets the scores of keys a causal row may not see to -inf (only tiles crossing the diagonal).
void mask_future(at::Tensor& scores, int64_t i0, int64_t j0, int64_t sq, int64_t sk) {
  const int64_t tq = scores.size(0), tk = scores.size(1);
  if (j0 + tk - 1 <= i0 + (sk - sq)) return;
  auto opts = at::TensorOptions().dtype(at::kLong);
  auto rows = at::arange(i0, i0 + tq, opts).unsqueeze(1);
  auto cols = at::arange(j0, j0 + tk, opts).unsqueeze(0);
  scores.masked_fill_(cols > rows + (sk - sq), -std::numeric_limits<double>::infinity());
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> attention_forward(const at::Tensor& q_in, const at::Tensor& k_in,
                                                     const at::Tensor& v_in, bool causal) {
  check_shapes(q_in, k_in, v_in);
  at::NoGradGuard no_grad;
  auto q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  const int64_t B = q.size(0), H = q.size(1), Sq = q.size(2), Sk = k.size(2), D = q.size(3);
  auto out = at::zeros_like(q);
  auto lse = at::full({B, H, Sq}, -std::numeric_limits<double>::infinity(), q.options());
  auto q3 = q.view({B * H, Sq, D}), k3 = k.view({B * H, Sk, D}), v3 = v.view({B * H, Sk, D});
  auto out3 = out.view({B * H, Sq, D}), lse2 = lse.view({B * H, Sq});
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      auto qb = q3[bh], kb = k3[bh], vb = v3[bh];
      for (int64_t i0 = 0; i0 < Sq; i0 += kQueryTile) {
        const int64_t tq = std::min(kQueryTile, Sq - i0);
        auto qt = qb.narrow(0, i0, tq);
        auto m = at::full({tq}, -std::numeric_limits<double>::infinity(), q.options());
        auto l = at::zeros({tq}, q.options());
        auto acc = at::zeros({tq, D}, q.options());
        const int64_t key_end = keys_for_tile(i0, tq, Sq, Sk, causal);
        for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
          const int64_t tk = std::min(kKeyTile, key_end - j0);
          auto s = at::mm(qt, kb.narrow(0, j0, tk).t()).mul_(scale);
          if (causal) mask_future(s, i0, j0, Sq, Sk);
          auto m_new = at::maximum(m, std::get<0>(s.max(1)));
          auto p = (s - m_new.unsqueeze(1)).exp_();  // every row saw key 0 in the first tile: m_new is finite
          auto shrink = (m - m_new).exp_();
          l.mul_(shrink).add_(p.sum(1));
          acc.mul_(shrink.unsqueeze(1)).add_(at::mm(p, vb.narrow(0, j0, tk)));
          m = m_new;
        }
        out3[bh].narrow(0, i0, tq).copy_(acc / l.unsqueeze(1));
        lse2[bh].narrow(0, i0, tq).copy_(m + l.log());
      }
    }
  });
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward(const at::Tensor& dout_in, const at::Tensor& q_in,
                                                                  const at::Tensor& k_in, const at::Tensor& v_in,
                                                                  const at::Tensor& out_in, const at::Tensor& lse_in,
                                                                  bool causal) {
  at::NoGradGuard no_grad;
  auto dout = dout_in.contiguous(), q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  const int64_t B = q.size(0), H = q.size(1), Sq = q.size(2), Sk = k.size(2), D = q.size(3);
  auto dq = at::zeros_like(q), dk = at::zeros_like(k), dv = at::zeros_like(v);
  auto delta = (dout * out_in).sum(-1).view({B * H, Sq});  // sum_j p_ij dp_ij = do_i . o_i
  auto q3 = q.view({B * H, Sq, D}), k3 = k.view({B * H, Sk, D}), v3 = v.view({B * H, Sk, D});
  auto do3 = dout.view({B * H, Sq, D}), lse2 = lse_in.contiguous().view({B * H, Sq});
  auto dq3 = dq.view({B * H, Sq, D}), dk3 = dk.view({B * H, Sk, D}), dv3 = dv.view({B * H, Sk, D});
  const double scale = 1.0 / std::sqrt(static_cast<double>(D));
  // One (batch, head) per task: its dq, dk and dv rows are written by that task alone.
  at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
    for (int64_t bh = begin; bh < end; ++bh) {
      auto qb = q3[bh], kb = k3[bh], vb = v3[bh], dob = do3[bh];
      auto dqb = dq3[bh], dkb = dk3[bh], dvb = dv3[bh];
      for (int64_t i0 = 0; i0 < Sq; i0 += kQueryTile) {
        const int64_t tq = std::min(kQueryTile, Sq - i0);
        auto qt = qb.narrow(0, i0, tq), dot = dob.narrow(0, i0, tq);
        auto lse_t = lse2[bh].narrow(0, i0, tq).unsqueeze(1), delta_t = delta[bh].narrow(0, i0, tq).unsqueeze(1);
        auto dqt = dqb.narrow(0, i0, tq);
        const int64_t key_end = keys_for_tile(i0, tq, Sq, Sk, causal);
        for (int64_t j0 = 0; j0 < key_end; j0 += kKeyTile) {
          const int64_t tk = std::min(kKeyTile, key_end - j0);
          auto kt = kb.narrow(0, j0, tk), vt = vb.narrow(0, j0, tk);
          auto s = at::mm(qt, kt.t()).mul_(scale);
          if (causal) mask_future(s, i0, j0, Sq, Sk);
          auto p = (s - lse_t).exp_();
          dvb.narrow(0, j0, tk).add_(at::mm(p.t(), dot));
          auto ds = p.mul_(at::mm(dot, vt.t()).sub_(delta_t)).mul_(scale);  // p * (dp - delta) * scale
          dqt.add_(at::mm(ds, kt));
          dkb.narrow(0, j0, tk).add_(at::mm(ds.t(), qt));
        }
      }
    }
  });
  return {dq, dk, dv};
}

}  // namespace slapo::kernels::cpu
