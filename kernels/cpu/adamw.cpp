// AdamW's update in one pass over each tensor on CPU: the parameter, its gradient and both
// moments are read and written once, where the per-op form (mul_, add_, addcmul_, sqrt, div,
// add_, addcdiv_) makes seven passes and a temporary as large as the parameter.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "cpu/cpu_kernels.h"

namespace slapo::kernels::cpu {

void adamw_step(at::Tensor& param, const at::Tensor& grad, at::Tensor& exp_avg, at::Tensor& exp_avg_sq,
                const AdamWHyper& h) {
  const double bias1 = 1 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bias2_sqrt = std::sqrt(1 - std::pow(h.beta2, static_cast<double>(h.step)));
  AT_DISPATCH_FLOATING_TYPES(param.scalar_type(), "adamw_step", [&] {
    scalar_t* p = param.data_ptr<scalar_t>();
    const scalar_t* g = grad.data_ptr<scalar_t>();
    scalar_t* m = exp_avg.data_ptr<scalar_t>();
    scalar_t* v = exp_avg_sq.data_ptr<scalar_t>();
    // The scalars as torch's ops see them: each op takes its Scalar in the tensor's type.
    const auto decay = static_cast<scalar_t>(1 - h.lr * h.weight_decay);
    const auto b1 = static_cast<scalar_t>(h.beta1), one_minus_b1 = static_cast<scalar_t>(1 - h.beta1);
    const auto b2 = static_cast<scalar_t>(h.beta2), one_minus_b2 = static_cast<scalar_t>(1 - h.beta2);
    const auto bias2 = static_cast<scalar_t>(bias2_sqrt), eps = static_cast<scalar_t>(h.eps);
    const auto step_size = static_cast<scalar_t>(-h.lr / bias1);
    const bool decays = h.weight_decay != 0;
    at::parallel_for(0, param.numel(), 16384, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        scalar_t gi = g[i];
        scalar_t pi = decays ? p[i] * decay : p[i];
        scalar_t mi = m[i] * b1 + gi * one_minus_b1;
        scalar_t vi = v[i] * b2 + gi * gi * one_minus_b2;
        scalar_t denom = std::sqrt(vi) / bias2 + eps;
        m[i] = mi;
        v[i] = vi;
        p[i] = pi + step_size * (mi / denom);
      }
    });
  });
}

}  // namespace slapo::kernels::cpu
