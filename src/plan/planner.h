// The planner: Megatron's uniform plans (TP x PP x DP, micro-batches, checkpointing, ZeRO-1) and
// the inter-op pass's pipelines (inter_op.h) costed by the model in cost_model.h, the fastest that
// fits chosen, and the plan written as a Lua schedule script a person reads, edits and runs with
// `slapo-lua run --nproc N`.
#pragma once

#include <string>
#include <vector>

#include "plan/cost_model.h"

namespace slapo::plan {

struct Ranked {
  Candidate candidate;
  Estimate estimate;
  std::string verdict;  ///< "chosen", or why it lost
  /// "grid" (Megatron's uniform plans), "inter-op" (the dynamic program over one layout) or
  /// "alpa" (the program with a submesh per stage)
  std::string origin = "grid";
};

struct Plan {
  ModelShape model;
  /// The plan script's `model` field: a quoted preset name or directory (default), or a Lua
  /// table of config fields for a model built from a config.
  std::string model_source;
  Cluster cluster;
  Workload work;
  std::vector<Ranked> ranked;  ///< the chosen plan first, then the others by predicted step time
  /// Alpa's unrestricted program's pipeline (a submesh per stage), reported beside the chosen plan;
  /// it is also one of `ranked`, and chosen when fastest.
  std::vector<Ranked> unrestricted;
  double search_s = 0;  ///< wall time of the search (the layer layouts' solves included)
  double trace_s = 0;   ///< wall time of building and tracing the layer the pass prices (layer_layouts.h)
  /// The intra-op pass's shard and sync calls for one layer (on `layer`), the layout the
  /// predictions price; empty without tensor parallelism or the pass (lay_out_layers). The note
  /// says what it chose, or what priced the layers instead.
  std::string layer_layout, layer_layout_note;
  /// A chosen plan whose stages have meshes of their own gets a layer layout per stage mesh of
  /// tp >= 2 instead (the same, by its tp x dp and sequence parallelism).
  struct MeshLayout {
    int tp = 1, dp = 1;
    bool sequence = false;
    std::string body, note;
  };
  std::vector<MeshLayout> mesh_layouts;
  const Ranked& chosen() const { return ranked.front(); }
  /// Puts the plan described as `description` (Candidate::describe, as the table prints it; or
  /// "grid", "inter-op", "alpa": the fastest fitting plan of that search) first,
  /// so the script is written for it; the planner's own choice stays in the list. Throws naming
  /// the closest descriptions when none matches.
  void pick(const std::string& name);
  /// A Lua script that builds the model, applies the plan with the reference schedules, checks it
  /// and trains `steps` steps; comments give the prediction and the alternatives.
  std::string lua_source(int steps) const;
  /// The table `slapo-lua plan` prints.
  std::string summary() const;
};

struct LayerPricing;
/// Fills plan.layer_layout for the chosen plan's tp x dp mesh from the pass that priced the search
/// (layer_layouts.h); without it, the note says what priced the layers.
void lay_out_layers(Plan& plan, const LayerPricing& pricing);

/// Where the reference schedules keep the layer list ("transformer.h", ...).
std::string layers_path(const ModelShape& model);

/// Raises naming the option when the batch, sequence or precision cannot be planned for.
void check_workload(const Workload& work);
/// Raises when the sequence is longer than the model's learned positions (GPT-2's n_positions,
/// BERT's max_position_embeddings); rotary models take any length.
void check_positions(const ModelConfig& config, const ModelShape& model, const Workload& work);

/// Enumerates the uniform plans for `cluster`: TP within a node dividing the heads (and key/value
/// heads), DP over the rest dividing the batch; throws naming the option when none fits (by how
/// much memory the most sharded one misses).
Plan plan_uniform(const ModelShape& model, const Cluster& cluster, const Workload& work);

/// The full search: Megatron's uniform grid with pipelines (inter_op.h's megatron_grid) and the
/// inter-op dynamic program over one rank layout (stages of their own layer counts and
/// checkpointing); `unrestricted` also runs Alpa's program with a submesh per stage.
struct SearchOptions {
  int max_stages = 0;         ///< pipeline stages at most (1: no pipeline; 0: as many as layers and devices allow)
  bool unrestricted = true;   ///< also run Alpa's program with a submesh per stage, for comparison
};
Plan plan_parallel(const ModelShape& model, const Cluster& cluster, const Workload& work,
                   const SearchOptions& options = {});

}  // namespace slapo::plan
