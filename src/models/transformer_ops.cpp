// Tensor helpers shared by the zoo's attention and loss code.
#include "models/transformer_ops.h"

#include <cmath>
#include <limits>

#include <ATen/Dispatch.h>

namespace slapo {

at::Tensor split_heads(const at::Tensor& x, int64_t head_dim) {
  return x.view({x.size(0), x.size(1), -1, head_dim}).transpose(1, 2);
}

at::Tensor merge_heads(const at::Tensor& x) {
  return x.transpose(1, 2).contiguous().view({x.size(0), x.size(2), -1});
}

c10::optional<at::Tensor> additive_mask(const c10::optional<at::Tensor>& padding, int64_t q_len,
                                        int64_t k_len, bool causal, const at::TensorOptions& opts) {
  if (!padding && !causal) return c10::nullopt;
  // The dtype's own lowest value, as transformers uses: float32's would overflow bfloat16 and float16.
  at::Scalar lowest;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, opts.dtype().toScalarType(), "additive_mask",
                                  [&] { lowest = static_cast<double>(std::numeric_limits<scalar_t>::lowest()); });
  at::Tensor mask = torch::zeros({1, 1, q_len, k_len}, opts);
  if (causal) {
    auto future = torch::ones({q_len, k_len}, opts.dtype(at::kBool)).triu(k_len - q_len + 1);
    mask = mask.masked_fill(future, lowest);
  }
  if (padding) {
    auto pad = padding->to(opts.device()).eq(0).view({padding->size(0), 1, 1, k_len});
    mask = mask.masked_fill(pad, lowest);
  }
  return mask;
}

at::Tensor attention_probs(const at::Tensor& q, const at::Tensor& k, const c10::optional<at::Tensor>& mask) {
  auto scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (mask) scores = scores + *mask;
  return at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
}

at::Tensor causal_lm_loss(const at::Tensor& logits, const at::Tensor& labels) {
  auto shifted = logits.narrow(1, 0, logits.size(1) - 1).contiguous();
  auto targets = labels.narrow(1, 1, labels.size(1) - 1).contiguous();
  return at::cross_entropy_loss(shifted.view({-1, shifted.size(-1)}).to(at::kFloat), targets.view({-1}),
                                {}, at::Reduction::Mean, /*ignore_index=*/-100);
}

}  // namespace slapo
