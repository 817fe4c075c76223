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
/// ModuleList of SwiGLU MLPs w1, w3 -> w2, named by expert id). (hidden_states [B, S, H]) -> (out
/// [B, S, H], router_logits [B*S, E]).
std::shared_ptr<Module> make_sparse_moe_block(const ModelConfig& c, const at::TensorOptions& o);

/// How a block's experts meet their rows.
/// - kAuto: grouped where it runs (CUDA rows computed in bf16, a LibTorch with a grouped matmul,
///   the zoo's experts unchanged), gathered otherwise.
/// - kGathered: the rows grouped by expert, each expert called once on its rows.
/// - kGrouped: the same rows, each projection of every expert in one grouped matmul (LibTorch's
///   _grouped_mm, from 2.9); refused by name where it cannot run.
/// - kDense: every expert on every token, weighted by the routing weights (zero where a token is
///   not routed to it): the same outputs at E/k times the expert work, the reference the others
///   are measured against. Refused on a block whose experts are spread over ranks.
enum class ExpertCompute { kAuto, kGathered, kGrouped, kDense };

/// Where a sparse MoE block's routed tokens meet their experts. The block routes; a dispatcher
/// takes tokens [T, H], each token's experts `selected` [T, k] and their `weights` [T, k], and
/// returns sum_j weights[t, j] x expert_{selected[t, j]}(tokens[t]) for every token, the experts
/// it runs here computed as `mode` says (run_experts). Without one the block's own experts run
/// here; shard_experts sets one that spreads them over ranks.
class ExpertDispatch {
 public:
  virtual ~ExpertDispatch() = default;
  virtual at::Tensor combine(const at::Tensor& tokens, const at::Tensor& selected, const at::Tensor& weights,
                             Module& experts, ExpertCompute mode) = 0;
  virtual std::string describe() const = 0;
};

/// Is `m` a sparse MoE block (MixtralSparseMoeBlock)?
bool is_sparse_moe_block(const Module& m);
/// The block's experts in the model (num_local_experts), whichever of them this process holds.
int64_t moe_expert_count(const Module& block);
/// Sets the block's dispatch (null: its experts run here again).
void set_expert_dispatch(Module& block, std::shared_ptr<ExpertDispatch> dispatch);
/// Sets how the block computes its experts (refused by name where `mode` cannot run).
void set_expert_compute(Module& block, ExpertCompute mode);
/// Whether this build's LibTorch has a grouped matmul (_grouped_mm, LibTorch 2.9 and later).
bool grouped_matmul_available();
/// Keeps the block's experts first .. first + count - 1 (their names, and so their parameters'
/// names, unchanged) and drops the rest.
void keep_experts(Module& block, int64_t first, int64_t count);
/// Each row of `rows` [R, H] through the expert `expert_of_row[r]` (an id among `experts`'
/// children's names), each expert called once on all its rows (or, `mode` grouped or auto where
/// it runs, every expert's projection in one grouped matmul): [R, H]. Every row's expert must be
/// one of the children.
at::Tensor run_experts(const at::Tensor& rows, const at::Tensor& expert_of_row, Module& experts,
                       ExpertCompute mode = ExpertCompute::kAuto);

/// transformers' load_balancing_loss_func: E x sum over experts of (the share of routed slots each
/// expert got) x (its mean router probability), over every layer's router logits [tokens, E]; with
/// an attention mask [B, S], over the tokens it keeps.
at::Tensor load_balancing_loss(const std::vector<at::Tensor>& router_logits, int64_t experts, int64_t top_k,
                               const c10::optional<at::Tensor>& attention_mask);

}  // namespace slapo
