// Memory-efficient attention on CPU: softmax(q k^T * scale [+ causal mask]) v computed one query
// row at a time with an online softmax (running max and sum), so no S x S matrix is ever held;
// backward recomputes the probabilities from the saved log-sum-exp (as FlashAttention does).
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

// Keys a causal query row may see: j <= i + (Sk - Sq), as the zoo's additive mask.
inline int64_t visible_keys(int64_t i, int64_t sq, int64_t sk, bool causal) {
  return causal ? std::min(sk, i + (sk - sq) + 1) : sk;
}

}  // namespace

std::tuple<at::Tensor, at::Tensor> attention_forward(const at::Tensor& q_in, const at::Tensor& k_in,
                                                     const at::Tensor& v_in, bool causal) {
  check_shapes(q_in, k_in, v_in);
  auto q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  const int64_t B = q.size(0), H = q.size(1), Sq = q.size(2), Sk = k.size(2), D = q.size(3);
  auto out = at::zeros_like(q);
  auto lse = at::empty({B, H, Sq}, q.options());
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "attention_forward", [&] {
    const scalar_t* qp = q.data_ptr<scalar_t>();
    const scalar_t* kp = k.data_ptr<scalar_t>();
    const scalar_t* vp = v.data_ptr<scalar_t>();
    scalar_t* op = out.data_ptr<scalar_t>();
    scalar_t* lp = lse.data_ptr<scalar_t>();
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    at::parallel_for(0, B * H * Sq, 8, [&](int64_t begin, int64_t end) {
      std::vector<double> acc(D);
      for (int64_t row = begin; row < end; ++row) {
        const int64_t bh = row / Sq, i = row % Sq;
        const scalar_t* qi = qp + row * D;
        const scalar_t* kb = kp + bh * Sk * D;
        const scalar_t* vb = vp + bh * Sk * D;
        double m = -std::numeric_limits<double>::infinity(), l = 0;
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j < visible_keys(i, Sq, Sk, causal); ++j) {
          double s = 0;
          for (int64_t d = 0; d < D; ++d) s += double(qi[d]) * double(kb[j * D + d]);
          s *= scale;
          if (s > m) {  // a new maximum: rescale what was summed so far
            double shrink = std::exp(m - s);
            l *= shrink;
            for (int64_t d = 0; d < D; ++d) acc[d] *= shrink;
            m = s;
          }
          double p = std::exp(s - m);
          l += p;
          for (int64_t d = 0; d < D; ++d) acc[d] += p * double(vb[j * D + d]);
        }
        for (int64_t d = 0; d < D; ++d) op[row * D + d] = scalar_t(l > 0 ? acc[d] / l : 0.0);
        lp[row] = scalar_t(l > 0 ? m + std::log(l) : -std::numeric_limits<double>::infinity());
      }
    });
  });
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward(const at::Tensor& dout_in, const at::Tensor& q_in,
                                                                  const at::Tensor& k_in, const at::Tensor& v_in,
                                                                  const at::Tensor& out_in, const at::Tensor& lse_in,
                                                                  bool causal) {
  auto dout = dout_in.contiguous(), q = q_in.contiguous(), k = k_in.contiguous(), v = v_in.contiguous();
  auto out = out_in.contiguous(), lse = lse_in.contiguous();
  const int64_t B = q.size(0), H = q.size(1), Sq = q.size(2), Sk = k.size(2), D = q.size(3);
  auto dq = at::zeros_like(q), dk = at::zeros_like(k), dv = at::zeros_like(v);
  AT_DISPATCH_FLOATING_TYPES(q.scalar_type(), "attention_backward", [&] {
    const scalar_t* qp = q.data_ptr<scalar_t>();
    const scalar_t* kp = k.data_ptr<scalar_t>();
    const scalar_t* vp = v.data_ptr<scalar_t>();
    const scalar_t* op = out.data_ptr<scalar_t>();
    const scalar_t* dop = dout.data_ptr<scalar_t>();
    const scalar_t* lp = lse.data_ptr<scalar_t>();
    scalar_t* dqp = dq.data_ptr<scalar_t>();
    scalar_t* dkp = dk.data_ptr<scalar_t>();
    scalar_t* dvp = dv.data_ptr<scalar_t>();
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    // One (batch, head) per task: its dk and dv rows are written by that task alone.
    at::parallel_for(0, B * H, 1, [&](int64_t begin, int64_t end) {
      for (int64_t bh = begin; bh < end; ++bh) {
        const scalar_t* kb = kp + bh * Sk * D;
        const scalar_t* vb = vp + bh * Sk * D;
        scalar_t* dkb = dkp + bh * Sk * D;
        scalar_t* dvb = dvp + bh * Sk * D;
        for (int64_t i = 0; i < Sq; ++i) {
          const int64_t row = bh * Sq + i;
          const scalar_t* qi = qp + row * D;
          const scalar_t* doi = dop + row * D;
          double delta = 0;  // sum_j p_ij dp_ij = do_i . o_i
          for (int64_t d = 0; d < D; ++d) delta += double(doi[d]) * double(op[row * D + d]);
          for (int64_t j = 0; j < visible_keys(i, Sq, Sk, causal); ++j) {
            double s = 0, dp = 0;
            for (int64_t d = 0; d < D; ++d) {
              s += double(qi[d]) * double(kb[j * D + d]);
              dp += double(doi[d]) * double(vb[j * D + d]);
            }
            double p = std::exp(s * scale - double(lp[row]));
            double ds = p * (dp - delta) * scale;
            for (int64_t d = 0; d < D; ++d) {
              dvb[j * D + d] += scalar_t(p * double(doi[d]));
              dqp[row * D + d] += scalar_t(ds * double(kb[j * D + d]));
              dkb[j * D + d] += scalar_t(ds * double(qi[d]));
            }
          }
        }
      }
    });
  });
  return {dq, dk, dv};
}

}  // namespace slapo::kernels::cpu
