// Tensor helpers shared by the zoo's attention and loss code.
#include "models/transformer_ops.h"

#include "core/error.h"

#include <torch/version.h>  // TORCH_VERSION_MAJOR: the LibTorch 2.x paths
#include <cmath>
#include <limits>

#include <ATen/Dispatch.h>
#include <torch/csrc/jit/frontend/tracer.h>

namespace slapo {

at::Tensor split_heads(const at::Tensor& x, int64_t head_dim) {
  return x.view({x.size(0), x.size(1), -1, head_dim}).transpose(1, 2);
}

at::Tensor merge_heads(const at::Tensor& x) {
  return x.transpose(1, 2).contiguous().view({x.size(0), x.size(2), -1});
}

namespace {
// A dtype's own lowest value, as transformers uses: float32's would overflow bfloat16 and float16.
at::Scalar lowest_of(at::ScalarType dtype) {
  at::Scalar lowest;
  AT_DISPATCH_FLOATING_TYPES_AND2(at::kBFloat16, at::kHalf, dtype, "lowest_of",
                                  [&] { lowest = static_cast<double>(std::numeric_limits<scalar_t>::lowest()); });
  return lowest;
}
}  // namespace

c10::optional<at::Tensor> additive_mask(const c10::optional<at::Tensor>& padding, int64_t q_len,
                                        int64_t k_len, bool causal, const at::TensorOptions& opts) {
  if (!padding && !causal) return c10::nullopt;
  const at::Scalar lowest = lowest_of(opts.dtype().toScalarType());
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

at::Tensor with_sliding_window(const c10::optional<at::Tensor>& mask, int64_t q_len, int64_t k_len, int64_t window,
                               const at::TensorOptions& opts) {
  at::Tensor base = mask ? *mask : *additive_mask(c10::nullopt, q_len, k_len, /*causal=*/true, opts);
  // the queries are the last q_len of the k_len positions
  auto query_pos = torch::arange(k_len - q_len, k_len, opts.dtype(at::kLong)).unsqueeze(1);
  auto key_pos = torch::arange(k_len, opts.dtype(at::kLong)).unsqueeze(0);
  return base.masked_fill(key_pos.le(query_pos - window), lowest_of(base.scalar_type()));
}

at::Tensor within_documents(const c10::optional<at::Tensor>& mask, const at::Tensor& positions,
                            const at::TensorOptions& opts) {
  const int64_t s = positions.size(1);
  at::Tensor base = mask ? *mask : *additive_mask(c10::nullopt, s, s, /*causal=*/true, opts);
  auto document = positions.to(opts.device()).eq(0).cumsum(1);  // which piece each token is in
  auto other = document.unsqueeze(2).ne(document.unsqueeze(1)).unsqueeze(1);  // [B, 1, S, S]
  return base.masked_fill(other, lowest_of(base.scalar_type()));
}

AttentionImpl attention_impl_from_config(const std::string& value) {
  if (value == "sdpa") return AttentionImpl::Sdpa;
  if (value == "eager") return AttentionImpl::Eager;
  return AttentionImpl::Auto;  // absent, or flash_attention_2 and others: SDPA picks its kernel
}

at::Tensor attention_context(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const c10::optional<at::Tensor>& given_mask, bool causal, AttentionImpl impl,
                             c10::optional<double> plain_p,
                             const std::function<at::Tensor(const at::Tensor&)>& dropout, c10::optional<double> scale) {
  const int64_t sq = q.size(-2), sk = k.size(-2);
  // Causal without a mask: SDPA's own causal kernels where they apply (as many queries as keys),
  // else the additive causal mask.
  const bool implicit_causal = causal && !given_mask;
  auto mask_for = [&] {
    return implicit_causal ? additive_mask(c10::nullopt, sq, sk, /*causal=*/true, q.options()) : given_mask;
  };
#if TORCH_VERSION_MAJOR >= 2
  // meta tensors (the planner's shape-only traces) take the eager ops: SDPA's math path on
  // LibTorch 2.11 reaches aten::where, which has no meta kernel there (the H200 run, 2026-11-29)
  bool fused = impl != AttentionImpl::Eager && plain_p && (impl == AttentionImpl::Sdpa || *plain_p == 0.0) &&
               !torch::jit::tracer::isTracing() && !q.is_meta();
  if (fused) {
    if (implicit_causal && sq == sk) return at::scaled_dot_product_attention(q, k, v, {}, *plain_p, true, scale);
    auto mask = mask_for();
    // SDPA takes a mask in the query's dtype (autocast: bf16 queries, a float32 mask); clamped
    // first, so float32's lowest becomes the dtype's lowest rather than -inf.
    if (mask && mask->scalar_type() != q.scalar_type())
      mask = mask->clamp_min(lowest_of(q.scalar_type())).to(q.scalar_type());
    return at::scaled_dot_product_attention(q, k, v, mask, *plain_p, /*is_causal=*/false, scale);
  }
#else
  (void)impl;
  (void)plain_p;
#endif
  auto mask = mask_for();
  return at::matmul(dropout(attention_probs(q, k, mask, scale)), v);
}

at::Tensor attention_probs(const at::Tensor& q, const at::Tensor& k, const c10::optional<at::Tensor>& mask,
                           c10::optional<double> scale) {
  auto scores = scale ? at::matmul(q, k.transpose(-1, -2)) * *scale
                      : at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (mask) scores = scores + *mask;
  if (scores.scalar_type() == at::kFloat) return at::softmax(scores, -1);
  // float16 and bfloat16 scores: softmax in float32, as HF's eager attention; cast only then, so a
  // float32 trace holds no no-op cast between softmax and the next matmul (find's patterns)
  return at::softmax(scores, -1, at::kFloat).to(q.scalar_type());
}

int64_t head_dim_of(const ModelConfig& c, const char* hidden_field, const char* heads_field) {
  int64_t h = c.integer(hidden_field), heads = c.integer(heads_field);
  if (h % heads != 0)
    throw Error(fmt::format("{}: {} {} is not a multiple of {} {}", c.model_type(), hidden_field, h, heads_field, heads));
  return h / heads;
}

void check_token_ids(const at::Tensor& ids, const char* who) {
  if (ids.dim() != 2)
    throw Error(fmt::format("{}: input_ids must be token ids [batch, seq], got a tensor of shape [{}]", who,
                            fmt::join(ids.sizes(), ", ")));
}

void check_sequence_fits(const at::Tensor& ids, int64_t rows, const char* who, const char* field, int64_t ranks) {
  check_token_ids(ids, who);
  if (ids.size(1) * ranks > rows)
    throw Error(fmt::format("{}: a sequence of {} tokens is longer than {} {} (the position embedding's rows)", who,
                            ids.size(1) * ranks, field, rows));
}

at::Tensor next_token_targets(const at::Tensor& labels) {
  return at::constant_pad_nd(labels.narrow(1, 1, labels.size(1) - 1), {0, 1}, /*value=*/-100);
}

// Position t predicts label t + 1. The labels shift (padded with the ignored index at the end),
// not the logits: a shifted copy of the logits is a vocabulary-wide tensor in forward and again in
// backward. The mean runs over the same positions either way.
c10::optional<int64_t> id_out_of_range(const at::Tensor& ids, int64_t rows, c10::optional<int64_t> ignored) {
  auto flat = ids.detach().reshape({-1});
  if (ignored) flat = flat.index({flat.ne(*ignored)});
  if (flat.numel() == 0) return c10::nullopt;
  if (int64_t hi = flat.max().item<int64_t>(); hi >= rows) return hi;
  if (int64_t lo = flat.min().item<int64_t>(); lo < 0) return lo;
  return c10::nullopt;
}

at::Tensor causal_lm_loss(const at::Tensor& logits, const at::Tensor& labels) {
  auto targets = next_token_targets(labels);
  auto flat = logits.reshape({-1, logits.size(-1)});
  return at::cross_entropy_loss(flat.scalar_type() == at::kFloat ? flat : flat.to(at::kFloat),
                                targets.reshape({-1}).to(labels.device()), {}, at::Reduction::Mean,
                                /*ignore_index=*/-100);
}

at::Tensor masked_lm_loss(const at::Tensor& logits, const at::Tensor& labels, const char* who) {
  const int64_t vocab = logits.size(-1);
  auto flat = logits.reshape({-1, vocab});
  try {
    return at::cross_entropy_loss(flat.scalar_type() == at::kFloat ? flat : flat.to(at::kFloat),
                                  labels.reshape({-1}).to(logits.device()), {}, at::Reduction::Mean, /*ignore_index=*/-100);
  } catch (const c10::Error&) {
    check_label_range(labels, vocab, who);
    throw;
  }
}

void check_label_range(const at::Tensor& labels, int64_t vocab, const char* who) {
  if (auto bad = id_out_of_range(labels, vocab, -100))
    throw Error(fmt::format("{}: labels hold {}, outside the vocabulary: a label is a token id from 0 to {} "
                            "(vocab_size {}), or -100 for a position the loss skips", who, *bad, vocab - 1, vocab));
}

}  // namespace slapo
