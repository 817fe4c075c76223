// What the intra-op pass chose for one module on one mesh: a record of each projection's layout
// and the syncs around them, with the prediction. Data only: stdlib/slapo/layer_layout.lua writes
// it as the shard and sync calls a schedule makes (autoshard's source, a plan script's layers).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>

namespace slapo::plan {

struct IntraOpPlan {
  /// leaf path -> "replicated" | "column" | "row" | "column_gather", and with sequence parallelism
  /// "column_seq" (tokens all-gathered first), "row_seq" (reduce-scattered over the tokens) or
  /// "token_parallel" (whole weights on this rank's tokens), "token_gather" (the same, its output
  /// all-gathered over the tokens: attention's keys and values for this rank's queries)
  std::map<std::string, std::string> strategy;
  std::map<std::string, int64_t> gather_axes;   ///< token_gather leaves: their output's token dimension
  std::map<std::string, int> groups;            ///< column leaves whose output is split into parts (GPT-2's c_attn)
  std::set<std::string> forked;                 ///< dropouts on head-split tensors: fork_rng
  /// column leaves whose shared input's gradient is all-reduced once, on this module (Megatron's f)
  std::map<std::string, std::string> parent_syncs;
  /// column_seq leaves whose shared input's tokens are all-gathered once, on this module
  std::map<std::string, std::string> parent_gathers;
  /// parameters ("ln_1.weight") that see this rank's tokens alone (norms under sequence
  /// parallelism): their gradients are all-reduced over the tensor-parallel ranks
  std::set<std::string> token_params;
  bool sequence = false;  ///< the module's input and output are split along the tokens
  int64_t token_axis = 1; ///< the input's sequence dimension
  std::map<std::string, std::string> types;     ///< leaf path -> "Linear" | "Conv1D"
  std::map<std::string, bool> has_bias;
  double step_s = 0, replicated_s = 0;  ///< predicted time of the plan and of no sharding
  double volume = 0;                    ///< the plan's forward communication volume (the "volume" objective's)
  double memory_bytes = 0, replicated_memory_bytes = 0;  ///< per device, as the ILP counts it
  bool zero = false;                    ///< the plan shards AdamW's moments over the data-parallel axis
  std::string solver;                   ///< "cbc" or "exhaustive"
  int variables = 0, constraints = 0;   ///< the ILP's size
  double solve_s = 0;                   ///< wall time in the solver (every ZeRO choice)
  int projections = 0, ops = 0;         ///< what it chose for
  /// The chosen layout in the planner's terms (cost_model.h's TpLayout): of the module's matmul
  /// work, parameters and saved activations, the parts divided over the tensor-parallel ranks; the
  /// elements per token all-reduced over them in forward (row outputs; an all-gather counts half)
  /// and in backward (column inputs' gradients).
  double flops = 0, split_flops = 0, params = 0, split_params = 0, saved = 0, split_saved = 0;
  double forward_reduced_per_token = 0, backward_reduced_per_token = 0;
};

}  // namespace slapo::plan
