// The fused kernels: one API over the CPU kernels (kernels/cpu) and, in CUDA builds, the CUDA ones
// (kernels/cuda). Each is a custom op (namespace "slapo", registered with TORCH_LIBRARY) with a
// hand-written forward and backward, callable from eager code and from TorchScript graphs.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace slapo::kernels {

/// gelu(x + bias), bias broadcast over the last dim; `tanh_approx` selects GELU's tanh form.
at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& bias, bool tanh_approx);

/// LLaMA's RMSNorm: weight * x / sqrt(mean(x^2, -1) + eps), statistics in float32 or better.
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps);

/// SwiGLU: silu(gate) * up, elementwise.
at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up);

/// Rotary embedding of q or k [B, H, S, D] with cos, sin [B, S, D] (rotate-half convention).
at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin);

/// softmax(q k^T / sqrt(D) [+ causal mask]) v for q [B, H, Sq, D], k and v [B, H, Sk, D], without
/// materialising the Sq x Sk matrix (online softmax forward, recomputation backward).
at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal);

/// attention through one of LibTorch's scaled_dot_product_attention kernels chosen by name, as
/// Slapo's test_attention picks its backends: "flash" (FlashAttention) or "efficient" (the
/// memory-efficient kernel), the others switched off for the call. They run on CUDA tensors in a
/// CUDA build of LibTorch 2.x; elsewhere, or for inputs the kernel does not take, this raises
/// naming the backend and why. ATen gives the gradients.
at::Tensor attention_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                          const std::string& backend);
/// The backends attention_sdpa runs in this build ({"flash", "efficient"} or none).
std::vector<std::string> sdpa_backends();

/// softmax(scores * scale + mask) over the last dim; `mask` is additive (0 or a large negative)
/// and broadcasts to scores (e.g. [B, 1, 1, Sk] padding or [1, 1, Sq, Sk] causal). No gradient
/// flows to the mask.
at::Tensor masked_softmax(const at::Tensor& scores, const at::Tensor& mask, double scale);

/// LayerNorm(dropout(x + bias, p) + residual) with LayerNorm's weight and bias, over the last dim:
/// the end of every BERT / GPT-2 sublayer in one pass. The dropout mask is drawn as
/// torch.nn.functional.dropout draws it (same generator, same order), so a seeded run gives the
/// unfused module's mask; `training = false` or p = 0 skips it.
at::Tensor bias_dropout_add_layer_norm(const at::Tensor& x, const at::Tensor& bias, const at::Tensor& residual,
                                       const at::Tensor& weight, const at::Tensor& ln_bias, double p, bool training,
                                       double eps);

}  // namespace slapo::kernels
