// DeepSpeed-Ulysses attention (Jacobs et al.): the sequence split over a group's ranks meets
// attention split over heads. An all-to-all hands every rank all the group's tokens of 1/N of the
// heads, attention runs on them as on one rank (blockwise, causal by the tokens' global indices),
// and a second all-to-all hands each rank its own tokens back with every head. Two exchanges of
// q, k, v and the output a layer, whatever N, against the ring's N - 1 steps of keys and values.
#pragma once

#include <torch/torch.h>

#include <memory>

#include "distributed/group.h"

namespace slapo::dist {

/// q [B, H, s, D], k and v [B, KVH, s, D]: this rank's tokens; `positions` [N, s] every rank's
/// tokens' global indices in group rank order (as ring_attention's). H must divide over the N
/// ranks; key/value heads travel unrepeated when KVH does too, else repeated to H first. `who`
/// names the caller in errors; `window` and `documents` as ring_attention's. Returns [B, H, s, D];
/// differentiable in q, k and v.
at::Tensor ulysses_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& positions,
                             const std::shared_ptr<Group>& group, double scale, int64_t score_bytes, int64_t window,
                             const char* who, const at::Tensor& documents = at::Tensor());

}  // namespace slapo::dist
