// Mixture-of-experts layers as transformers' Mixtral computes them: a router picks each token's
// top-k experts, and each expert runs once on all the tokens routed to it.
#pragma once

#include <torch/torch.h>

#include <memory>
#include <vector>

#include "core/module.h"
#include "models/config.h"

namespace slapo {

/// MixtralSparseMoeBlock: `gate` (the router, hidden -> num_local_experts) and `experts` (a
/// ModuleList of SwiGLU MLPs w1, w3 -> w2). (hidden_states [B, S, H]) -> (out [B, S, H],
/// router_logits [B*S, E]).
std::shared_ptr<Module> make_sparse_moe_block(const ModelConfig& c, const at::TensorOptions& o);

/// transformers' load_balancing_loss_func: E x sum over experts of (the share of routed slots each
/// expert got) x (its mean router probability), over every layer's router logits [tokens, E]; with
/// an attention mask [B, S], over the tokens it keeps.
at::Tensor load_balancing_loss(const std::vector<at::Tensor>& router_logits, int64_t experts, int64_t top_k,
                               const c10::optional<at::Tensor>& attention_mask);

}  // namespace slapo
