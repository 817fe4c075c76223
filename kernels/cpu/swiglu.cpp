// Fused SwiGLU on CPU: y = silu(gate) * up, forward and backward in one pass each.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include <cmath>

#include "cpu/cpu_kernels.h"

namespace slapo::kernels::cpu {

at::Tensor swiglu_forward(const at::Tensor& gate_in, const at::Tensor& up_in) {
  auto gate = gate_in.contiguous(), up = up_in.contiguous();
  auto y = at::empty_like(gate);
  AT_DISPATCH_FLOATING_TYPES(gate.scalar_type(), "swiglu_forward", [&] {
    const scalar_t* gp = gate.data_ptr<scalar_t>();
    const scalar_t* up_ = up.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>();
    at::parallel_for(0, gate.numel(), 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        scalar_t g = gp[i];
        yp[i] = g / (scalar_t(1) + std::exp(-g)) * up_[i];
      }
    });
  });
  return y;
}

std::tuple<at::Tensor, at::Tensor> swiglu_backward(const at::Tensor& dy_in, const at::Tensor& gate_in,
                                                   const at::Tensor& up_in) {
  auto dy = dy_in.contiguous(), gate = gate_in.contiguous(), up = up_in.contiguous();
  auto dgate = at::empty_like(gate), dup = at::empty_like(up);
  AT_DISPATCH_FLOATING_TYPES(gate.scalar_type(), "swiglu_backward", [&] {
    const scalar_t* dyp = dy.data_ptr<scalar_t>();
    const scalar_t* gp = gate.data_ptr<scalar_t>();
    const scalar_t* upp = up.data_ptr<scalar_t>();
    scalar_t* dgp = dgate.data_ptr<scalar_t>();
    scalar_t* dup_ = dup.data_ptr<scalar_t>();
    at::parallel_for(0, gate.numel(), 4096, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) {
        scalar_t g = gp[i];
        scalar_t sig = scalar_t(1) / (scalar_t(1) + std::exp(-g));
        scalar_t silu = g * sig;
        dup_[i] = dyp[i] * silu;
        dgp[i] = dyp[i] * upp[i] * sig * (scalar_t(1) + g * (scalar_t(1) - sig));
      }
    });
  });
  return {dgate, dup};
}

}  // namespace slapo::kernels::cpu
