// Tensor helpers shared by the attention and loss code of the zoo models.
#pragma once

#include <torch/torch.h>

#include "models/config.h"

#include <functional>
#include <string>

namespace slapo {

/// [B, S, H*D] -> [B, H, S, D] where D = head_dim.
at::Tensor split_heads(const at::Tensor& x, int64_t head_dim);
/// [B, H, S, D] -> [B, S, H*D].
at::Tensor merge_heads(const at::Tensor& x);
/// Additive mask [B or 1, 1, S_q, S_k] from an optional padding mask (1 = keep) and causality.
c10::optional<at::Tensor> additive_mask(const c10::optional<at::Tensor>& padding, int64_t q_len,
                                        int64_t k_len, bool causal, const at::TensorOptions& opts);
/// `mask` (or the causal mask when none) with every key `window` or more positions before its
/// query masked out too: transformers' sliding-window attention (Mistral, Qwen2).
at::Tensor with_sliding_window(const c10::optional<at::Tensor>& mask, int64_t q_len, int64_t k_len, int64_t window,
                               const at::TensorOptions& opts);
/// `mask` (or the causal mask when none) with attention kept inside each packed document:
/// `positions` [B, S] start again at 0 where a document starts (transformers' packing with
/// position_ids), and no query sees a key of another document. [B, 1, S, S].
at::Tensor within_documents(const c10::optional<at::Tensor>& mask, const at::Tensor& positions,
                            const at::TensorOptions& opts);
/// softmax(q k^T / sqrt(D) + mask) before dropout; q, k: [B, H, S, D].
/// `scale` replaces 1 / sqrt(D) (GPT-2's scale_attn_weights and scale_attn_by_inverse_layer_idx).
at::Tensor attention_probs(const at::Tensor& q, const at::Tensor& k, const c10::optional<at::Tensor>& mask,
                           c10::optional<double> scale = c10::nullopt);
/// How attention runs ("attn_implementation" in config.json, as transformers names it):
/// Auto: LibTorch 2.x's scaled_dot_product_attention (flash, memory-efficient or cuDNN kernels on
/// CUDA) whenever the attention dropout is a plain Dropout that drops nothing (eval, or p = 0),
/// else the eager ops; Sdpa: SDPA also with dropout, drawn inside the kernel (other masks than a
/// separate Dropout would draw); Eager: matmul, softmax, Dropout module, matmul. Traced calls always
/// run eager, so traced graphs keep the ops fuse patterns match. LibTorch 1.x runs eager.
enum class AttentionImpl { Auto, Sdpa, Eager };
AttentionImpl attention_impl_from_config(const std::string& value);

/// softmax(q k^T / sqrt(D) + mask), dropped out, @ v -> [B, H, S, D]. Without a mask and with
/// `causal`, each query sees the keys up to its own position (the last query sees all). `dropout`
/// applies the module's attention dropout child to the probabilities; `plain_p` is that child's
/// drop rate when it is a plain Dropout (0 when it drops nothing), none otherwise.
at::Tensor attention_context(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const c10::optional<at::Tensor>& mask, bool causal, AttentionImpl impl,
                             c10::optional<double> plain_p,
                             const std::function<at::Tensor(const at::Tensor&)>& dropout,
                             c10::optional<double> scale = c10::nullopt);
/// The width of one head: `hidden` / `heads`, or an error naming the model type and both config
/// fields when the heads do not split the width evenly.
int64_t head_dim_of(const ModelConfig& c, const char* hidden_field, const char* heads_field);
/// Refuses token ids that are not [batch, seq], naming `who`.
void check_token_ids(const at::Tensor& ids, const char* who);
/// Refuses token ids [B, S] longer than `positions` (a learned position embedding's rows), naming
/// `who` and the config field that sets the length.
/// `ranks`: ids hold one rank's share of a sequence split over that many (context_parallel).
void check_sequence_fits(const at::Tensor& ids, int64_t positions, const char* who, const char* field,
                         int64_t ranks = 1);
/// Each position's label: the next position's, the last one ignored (-100).
at::Tensor next_token_targets(const at::Tensor& labels);
/// Causal-LM loss: logits[:, :-1] predict labels[:, 1:]; label -100 is ignored.
at::Tensor causal_lm_loss(const at::Tensor& logits, const at::Tensor& labels);
/// Masked-LM loss: logits[:, t] predict labels[:, t] where the label is not -100 (unshifted). A
/// label outside the vocabulary is refused naming `who` and the valid range.
at::Tensor masked_lm_loss(const at::Tensor& logits, const at::Tensor& labels, const char* who);
/// Refuses labels that are neither -100 nor a token id below `vocab`, naming `who` and the range.
void check_label_range(const at::Tensor& labels, int64_t vocab, const char* who);

/// The id furthest outside [0, rows) (the largest when one is too large, else the smallest), ids equal
/// to `ignored` aside; nullopt when every id fits. For errors after ATen refused a lookup, so a
/// correct call pays for no scan.
c10::optional<int64_t> id_out_of_range(const at::Tensor& ids, int64_t rows, c10::optional<int64_t> ignored = {});

}  // namespace slapo
