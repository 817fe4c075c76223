// Tensor helpers shared by the attention and loss code of the zoo models.
#pragma once

#include <torch/torch.h>

namespace slapo {

/// [B, S, H*D] -> [B, H, S, D] where D = head_dim.
at::Tensor split_heads(const at::Tensor& x, int64_t head_dim);
/// [B, H, S, D] -> [B, S, H*D].
at::Tensor merge_heads(const at::Tensor& x);
/// Additive mask [B or 1, 1, S_q, S_k] from an optional padding mask (1 = keep) and causality.
c10::optional<at::Tensor> additive_mask(const c10::optional<at::Tensor>& padding, int64_t q_len,
                                        int64_t k_len, bool causal, const at::TensorOptions& opts);
/// softmax(q k^T / sqrt(D) + mask) before dropout; q, k: [B, H, S, D].
at::Tensor attention_probs(const at::Tensor& q, const at::Tensor& k, const c10::optional<at::Tensor>& mask);
/// Causal-LM loss: logits[:, :-1] predict labels[:, 1:]; label -100 is ignored.
at::Tensor causal_lm_loss(const at::Tensor& logits, const at::Tensor& labels);

}  // namespace slapo
