// The planner's records as Lua tables, and the plan script written from them: C++ returns the
// data, stdlib/slapo/plan_script.lua and layer_layout.lua write the Lua.
#pragma once

#include <lua.hpp>

#include <string>
#include <vector>

#include "plan/planner.h"

namespace slapo {

/// An intra-op layout (plan/intra_op_plan.h): {strategy = {path = style}, groups =, gather_axes =,
/// forked = {path...}, parent_syncs =, parent_gathers =, token_params = {name...}, sequence =,
/// token_axis =, types =, has_bias =, step_s =, memory_mib =, ..., solver =, variables =, constraints =}.
void push_layer_layout(lua_State* L, const plan::IntraOpPlan& layout);

/// One ranked plan: its knobs (tp, dp, checkpoint, zero, sequence, pp, micro_batches), uniform_mesh, `stages`
/// (each with its time_s and peak_gib where the estimate has them), `name`, the step's parts,
/// peak_gib, fits, verdict and origin.
void push_ranked_plan(lua_State* L, const plan::Ranked& ranked, int layers);

/// The whole plan: {model = {name, type, parameters, layers, source}, cluster = {nodes, per_node,
/// devices, device}, work = {batch, seq, dtype}, steps, ranked = {...}, unrestricted = {...},
/// layer_layout =, layer_layout_note =, mesh_layouts = {{tp, dp, sequence, layout, note}...},
/// summary, search_s, trace_s}.
void push_plan_record(lua_State* L, const plan::Plan& plan, int steps);

/// The pin table at `idx` (nil: none): {tp = n | true, dp =, micro_batches =, stages = {layers, ...},
/// checkpoint = bool | {bool per stage}, zero =, fully_shard =, reshard_after_forward =, sequence =}.
/// Errors name `plan: pin.<key>` and the valid forms.
plan::Pins read_plan_pins(lua_State* L, int idx);

/// The pins a schedule file makes (`slapo-lua plan MODEL --from FILE`): FILE returns
/// `function(sch) ... end` (what `sch:log()` writes), applied to MODEL built on the meta device;
/// stdlib/slapo/plan_pins.lua reads the pins. `unpriced` gets the primitives it applied that the
/// planner does not price.
plan::Pins pins_from_schedule_file(const std::string& model, const std::string& file, std::vector<std::string>& unpriced);

/// The plan script for `plan` (stdlib/slapo/plan_script.lua's write), from a Lua state of its own:
/// what `slapo-lua plan --out` writes.
std::string write_plan_script(const plan::Plan& plan, int steps);

}  // namespace slapo
