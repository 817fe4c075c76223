// Ring attention (Liu et al., "Ring Attention with Blockwise Transformers"): causal attention of
// this rank's queries over the keys and values of every rank of a group, each rank's block passed
// to the next rank around the ring while the block in hand is computed, softmax combined online.
// No rank holds more than its queries' scores against one block of keys; backward passes the
// blocks around again, their key and value gradients travelling with them back to their owner.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "distributed/group.h"

namespace slapo::dist {

/// [B, KVH, s, D] -> [B, KVH * groups, s, D], each head `groups` times in a row (the order of the
/// query heads that share it).
at::Tensor repeat_heads(const at::Tensor& x, int64_t groups);

/// q [B, H, s, D], k and v [B, KVH, s, D] (H a multiple of KVH: grouped-query heads share theirs):
/// this rank's tokens. `positions` [N, s] holds every rank's tokens' global indices, in group rank
/// order; a query attends to the keys at or before its own index. `scale` multiplies the scores.
/// `score_bytes` bounds the float32 scores a step computes at once: the queries go against each
/// block in chunks of rows that fit (at least one row). `window` > 0: a sliding window, a query
/// attending to the keys less than `window` positions before it (Mistral's sliding_window).
/// `documents` (defined: packed documents) [B, S] is each row's document id by global index, S the
/// whole sequence: a query attends only to keys of its own document.
/// Returns [B, H, s, D] in q's dtype; differentiable in q, k and v.
at::Tensor ring_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& positions,
                          const std::shared_ptr<Group>& group, double scale, int64_t score_bytes = 32 << 20,
                          int64_t window = 0, const at::Tensor& documents = at::Tensor());

/// The same on one rank (a ring of one): causal attention of q [B, H, S, D] over k and v
/// [B, KVH, S, D] of the same tokens, whose global indices are `positions` [S] (in any order of
/// equal runs, as ring_attention's), a chunk of query rows against one run of keys at a time: the
/// float32 scores of a step stay within `score_bytes`, and no S x S matrix is formed.
at::Tensor blockwise_causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                      const at::Tensor& positions, double scale, int64_t score_bytes = 32 << 20,
                                      int64_t window = 0, const at::Tensor& documents = at::Tensor());

}  // namespace slapo::dist
