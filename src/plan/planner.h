// The planner: Megatron's uniform plans (TP x PP x DP, micro-batches, checkpointing, ZeRO-1) and
// the inter-op pass's pipelines (inter_op.h) costed by the model in cost_model.h, the fastest that
// fits chosen. It returns a record (Plan); stdlib/slapo/plan_script.lua writes it as the Lua
// schedule script a person reads, edits and runs with `slapo-lua run --nproc N`.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

#include "models/config.h"
#include "plan/cost_model.h"
#include "plan/intra_op_plan.h"
#include "plan/pins.h"

namespace slapo::plan {

struct Ranked {
  Candidate candidate;
  Estimate estimate;
  std::string verdict;  ///< "chosen", or why it lost
  /// "grid" (Megatron's uniform plans), "inter-op" (the dynamic program over one layout),
  /// "alpa" (the program with a submesh per stage) or "named" (a plan --pick wrote out, Plan::pick)
  std::string origin = "grid";
};

struct Plan {
  ModelShape model;
  /// What the plan script builds: a preset name or a directory's absolute path (a string), or a
  /// model's config fields (an object).
  nlohmann::json model_source;
  Cluster cluster;
  Workload work;
  std::vector<Ranked> ranked;  ///< the chosen plan first, then the others by predicted step time
  /// Alpa's unrestricted program's pipeline (a submesh per stage), reported beside the chosen plan;
  /// it is also one of `ranked`, and chosen when fastest.
  std::vector<Ranked> unrestricted;
  /// With pins (PlanRequest::pins): what they hold ("tp 2, checkpoint"), and the plan the search
  /// chose without them, its verdict saying what keeping them costs; `ranked` holds only plans
  /// that keep them.
  std::string pins;
  Pins kept;  ///< the pins themselves: a plan --pick names must keep them too
  std::optional<Ranked> unpinned;
  double search_s = 0;  ///< wall time of the search (the layer layouts' solves included)
  double trace_s = 0;   ///< wall time of building and tracing the layer the pass prices (layer_layouts.h)
  /// The intra-op pass's layout of one layer (its paths below the first layer's), the layout the
  /// predictions price; none without tensor parallelism or the pass (lay_out_layers). The note
  /// says what it chose, or what priced the layers instead.
  std::optional<IntraOpPlan> layer_layout;
  std::string layer_layout_note;
  /// A chosen plan whose stages have meshes of their own gets a layer layout per stage mesh of
  /// tp >= 2 instead (the same, by its tp x dp and sequence parallelism).
  struct MeshLayout {
    int tp = 1, dp = 1;
    bool sequence = false;
    IntraOpPlan layout;
    std::string note;
  };
  std::vector<MeshLayout> mesh_layouts;
  const Ranked& chosen() const { return ranked.front(); }
  /// Puts the plan described as `description` (Candidate::describe, as the table prints it; or
  /// "grid", "inter-op", "alpa": the fastest fitting plan of that search) first,
  /// so the script is written for it; the planner's own choice stays in the list. A plan the
  /// search did not consider, written the same way (plan_name.h), is checked, priced and added
  /// ("named"). Throws naming what does not read or hold, and the closest description considered.
  void pick(const std::string& name);
  /// The table `slapo-lua plan` prints.
  std::string summary() const;
};

struct LayerPricing;
/// Fills plan.layer_layout for the chosen plan's tp x dp mesh from the pass that priced the search
/// (layer_layouts.h); without it, the note says what priced the layers.
void lay_out_layers(Plan& plan, const LayerPricing& pricing);

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

/// What `slapo-lua plan` and `slapo.plan` ask for.
struct PlanRequest {
  /// A preset name or a Hugging Face directory (its config.json is read); with `config`, the name
  /// the table prints for that model.
  std::string model;
  std::optional<ModelConfig> config;  ///< a zoo model's own config (slapo.plan(model))
  std::string cluster = "1x1:cpu";    ///< Cluster::parse's spec
  Workload work;
  SearchOptions search;
  std::string pick;                   ///< Plan::pick's name; empty: the planner's choice
  std::string layer_costs = "ilp";    ///< price_layers' choice: "ilp" or "megatron"
  Pins pins;                          ///< choices already made: the plan keeps them
};

/// Narrows a searched plan to the plans that keep `pins` (the search's own, and Megatron's grid
/// reshaped to the pinned stages), the best without them kept as `unpinned`. Raises naming the
/// pins when no plan keeps them, or none that keeps them fits.
void keep_pins(Plan& plan, const Pins& pins);

/// The planner's one entry point: prices the layers, searches, keeps the pins, applies the pick
/// and lays out the chosen plan's layers. Raises naming the option that cannot be planned for.
Plan make_plan(const PlanRequest& request);

}  // namespace slapo::plan
