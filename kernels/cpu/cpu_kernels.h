// The CPU implementations behind kernels.h: contiguous inputs, float or double, forward and
// backward each one pass over the data, parallel over rows with at::parallel_for.
#pragma once

#include <torch/torch.h>

#include <tuple>

namespace slapo::kernels::cpu {

at::Tensor bias_gelu_forward(const at::Tensor& x, const at::Tensor& bias, bool tanh_approx);
/// Returns (dx, dbias).
std::tuple<at::Tensor, at::Tensor> bias_gelu_backward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& bias,
                                                      bool tanh_approx);

/// Returns (y, inverse rms per row).
std::tuple<at::Tensor, at::Tensor> rms_norm_forward(const at::Tensor& x, const at::Tensor& weight, double eps);
/// Returns (dx, dweight).
std::tuple<at::Tensor, at::Tensor> rms_norm_backward(const at::Tensor& dy, const at::Tensor& x, const at::Tensor& weight,
                                                     const at::Tensor& inv_rms);

at::Tensor swiglu_forward(const at::Tensor& gate, const at::Tensor& up);
/// Returns (dgate, dup).
std::tuple<at::Tensor, at::Tensor> swiglu_backward(const at::Tensor& dy, const at::Tensor& gate, const at::Tensor& up);

/// `inverse` rotates by -theta (the backward of the rotation).
at::Tensor rope_apply(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin, bool inverse);

/// Memory-efficient attention: returns (out, log-sum-exp per query row).
std::tuple<at::Tensor, at::Tensor> attention_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                     bool causal);
/// Returns (dq, dk, dv), recomputing probabilities from the log-sum-exp.
std::tuple<at::Tensor, at::Tensor, at::Tensor> attention_backward(const at::Tensor& dout, const at::Tensor& q,
                                                                  const at::Tensor& k, const at::Tensor& v,
                                                                  const at::Tensor& out, const at::Tensor& lse,
                                                                  bool causal);

}  // namespace slapo::kernels::cpu
