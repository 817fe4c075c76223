// Raw-pointer launchers of the CUDA kernels. They know no LibTorch, so they compile with nvcc
// against any torch build; kernels.h wraps them for tensors where a CUDA libtorch is present.
#pragma once

#include <cstdint>

namespace slapo::cuda {

/// y = gelu(x + bias) over a [rows, cols] row-major matrix; `tanh_approx` picks GELU's tanh form.
/// Returns the CUDA error code of the launch (0 = success).
int bias_gelu_forward(const float* x, const float* bias, float* y, int64_t rows, int64_t cols, bool tanh_approx,
                      void* stream);

/// dx = dy * gelu'(x + bias) (dbias is the column sum of dx, reduced by the caller).
int bias_gelu_backward(const float* dy, const float* x, const float* bias, float* dx, int64_t rows, int64_t cols,
                       bool tanh_approx, void* stream);

/// RMSNorm over rows of `cols`: y = w * x / rms, inv_rms per row kept for backward.
int rms_norm_forward(const float* x, const float* weight, float* y, float* inv_rms, int64_t rows, int64_t cols,
                     float eps, void* stream);
/// dx and dweight; `scratch` holds rows * cols floats.
/// `scratch` (rows * cols) ends holding dy * x * inv_rms, whose column sums are dweight; with
/// dweight null the caller reduces it (ATen's column reduction beats this file's simple one).
int rms_norm_backward(const float* dy, const float* x, const float* weight, const float* inv_rms, float* dx,
                      float* dweight, float* scratch, int64_t rows, int64_t cols, void* stream);

/// y = silu(gate) * up over n elements, and its backward.
int swiglu_forward(const float* gate, const float* up, float* y, int64_t n, void* stream);
int swiglu_backward(const float* dy, const float* gate, const float* up, float* dgate, float* dup, int64_t n,
                    void* stream);

/// Rotary embedding of x [B, H, S, D] with cos, sin [B, S, D]; `inverse` rotates back (backward).
int rope(const float* x, const float* cos, const float* sin, float* y, int64_t batch, int64_t heads, int64_t seq,
         int64_t dim, bool inverse, void* stream);

/// How an additive mask broadcasts to scores of shape [sizes..., cols]: element strides per
/// leading dim (0 where it broadcasts) and along the last dim.
struct MaskLayout {
  int dims = 0;
  int64_t sizes[6] = {}, strides[6] = {};
  int64_t col_stride = 1;
};
/// softmax(scores * scale + mask) per row of `cols`, and its backward (no gradient to the mask).
int masked_softmax_forward(const float* scores, const float* mask, const MaskLayout& layout, float* y, int64_t rows,
                           int64_t cols, float scale, void* stream);
int masked_softmax_backward(const float* dy, const float* y, float* dscores, int64_t rows, int64_t cols, float scale,
                            void* stream);

/// LayerNorm(dropout(x + bias) + residual): `keep` is the dropout's 0/1 mask or null, kept values
/// scaled by keep_scale; `normed` (rows * cols) and `rstd` (rows) are kept for backward.
int layer_norm_tail_forward(const float* x, const float* bias, const float* residual, const float* keep,
                            float keep_scale, const float* weight, const float* ln_bias, float* y, float* normed,
                            float* rstd, int64_t rows, int64_t cols, float eps, void* stream);
/// dx, dbias, dresidual, dweight, dln_bias; `scratch` holds rows * cols floats (dy * normed).
/// dbias, dweight and dln_bias are column sums of dx, scratch and dy; each one passed null is
/// left to the caller.
int layer_norm_tail_backward(const float* dy, const float* normed, const float* rstd, const float* weight,
                             const float* keep, float keep_scale, float* dx, float* dbias, float* dresidual,
                             float* dweight, float* dln_bias, float* scratch, int64_t rows, int64_t cols,
                             void* stream);

/// softmax(q k^T / sqrt(D) [+ causal]) v for q [BH, Sq, D], k and v [BH, Sk, D], D <= 128, without
/// an Sq x Sk matrix; lse [BH, Sq] is kept for backward, which recomputes the probabilities.
int attention_forward(const float* q, const float* k, const float* v, float* out, float* lse, int64_t batch_heads,
                      int64_t sq, int64_t sk, int64_t dim, bool causal, void* stream);
int attention_backward(const float* dout, const float* q, const float* k, const float* v, const float* out,
                       const float* lse, float* dq, float* dk, float* dv, int64_t batch_heads, int64_t sq, int64_t sk,
                       int64_t dim, bool causal, void* stream);

/// Number of visible CUDA devices, or -1 with `error` set when the driver is missing.
int device_count(const char** error);

}  // namespace slapo::cuda
