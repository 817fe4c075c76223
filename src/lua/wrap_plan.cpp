// slapo.plan(model, {cluster =, batch =, seq =, steps =, dtype =, max_stages =, pick =}): the planner from Lua. Returns a table
// with the chosen plan's fields, its prediction, the alternatives and `source` (the plan as a Lua
// script); tostring gives the planner's table.
#include <cmath>

#include "core/data_dirs.h"
#include "core/error.h"
#include "core/schedule.h"
#include "lua/runtime.h"
#include "lua/wrap.h"
#include "models/zoo.h"
#include "plan/intra_op.h"
#include "plan/layer_layouts.h"
#include "plan/selection_ilp.h"
#include "plan/planner.h"
#include "primitives/primitives.h"

namespace slapo {

namespace {

// A JSON value as a Lua literal (config fields into the plan script).
std::string lua_literal(const nlohmann::json& j) {
  if (j.is_null()) return "nil";
  if (j.is_boolean()) return j.get<bool>() ? "true" : "false";
  if (j.is_number_integer()) return std::to_string(j.get<int64_t>());
  if (j.is_number()) return fmt::format("{}", j.get<double>());
  if (j.is_string()) return j.dump();  // JSON's escapes are valid in Lua's double-quoted strings
  std::vector<std::string> items;
  if (j.is_array())
    for (auto& v : j) items.push_back(lua_literal(v));
  else
    for (auto& [k, v] : j.items())
      if (!v.is_null()) items.push_back(fmt::format("[{}] = {}", nlohmann::json(k).dump(), lua_literal(v)));
  return "{ " + fmt::format("{}", fmt::join(items, ", ")) + " }";
}

void set_number(lua_State* L, const char* key, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, key);
}
void set_bool(lua_State* L, const char* key, bool v) {
  lua_pushboolean(L, v);
  lua_setfield(L, -2, key);
}
void set_string(lua_State* L, const char* key, const std::string& v) {
  lua_pushstring(L, v.c_str());
  lua_setfield(L, -2, key);
}

void push_ranked(lua_State* L, const plan::Ranked& r, int layers) {
  lua_newtable(L);
  set_number(L, "tp", r.candidate.tp);
  set_number(L, "dp", r.candidate.dp);
  set_number(L, "checkpoint", r.candidate.checkpoint ? 1.0 : 0.0);
  set_bool(L, "zero", r.candidate.zero);
  set_bool(L, "sequence", r.candidate.sequence);
  set_number(L, "pp", r.candidate.pp());
  set_number(L, "micro_batches", r.candidate.micro_batches);
  lua_createtable(L, r.candidate.pp(), 0);
  int index = 0;
  for (auto& stage : r.candidate.resolved(layers)) {
    lua_newtable(L);
    set_number(L, "layers", stage.layers);
    set_number(L, "tp", stage.tp);
    set_number(L, "dp", stage.dp);
    set_bool(L, "checkpoint", stage.checkpoint);
    set_bool(L, "zero", stage.zero);
    set_bool(L, "sequence", stage.sequence);
    lua_rawseti(L, -2, ++index);
  }
  lua_setfield(L, -2, "stages");
  set_string(L, "name", r.candidate.describe());  // as the table names it (and pick takes it)
  set_number(L, "step_s", r.estimate.step_s);
  // the step's parts, as the table's columns
  set_number(L, "compute_s", r.estimate.compute_s);
  set_number(L, "tp_comm_s", r.estimate.tp_comm_s);
  set_number(L, "p2p_s", r.estimate.p2p_s);
  set_number(L, "dp_comm_s", r.estimate.dp_comm_s);
  set_number(L, "optimizer_s", r.estimate.optimizer_s);
  set_number(L, "peak_gib", plan::to_gib(r.estimate.peak_bytes));
  set_bool(L, "fits", r.estimate.fits);
  set_string(L, "verdict", r.verdict);
  set_string(L, "origin", r.origin);
}

int plan_tostring(lua_State* L) {
  lua_getfield(L, 1, "summary");
  return 1;
}

int w_plan(lua_State* L) {
  const char* fn = "plan";
  ModelConfig config;
  std::string name, source;
  if (lua_type(L, 1) == LUA_TSTRING) {
    name = lua_tostring(L, 1);
    config = ModelConfig::preset(name);
    source = nlohmann::json(name).dump();
  } else if (lx_is_module(L, 1)) {
    const ModelConfig* c = model_config(*lx_check_module(L, 1));
    if (!c) throw Error("plan: the module is not a zoo model (no config); give a preset name or a zoo model");
    config = *c;
    name = config.model_type();
    source = lua_literal(config.json());
  } else {
    throw Error(fmt::format("plan: expected a preset name or a zoo model, got {}", luaL_typename(L, 1)));
  }
  lx_check_option_keys(L, 2, {"cluster", "batch", "seq", "steps", "dtype", "max_stages", "pick", "layer_costs"}, fn);
  std::string cluster_spec = lx_opt_string(L, 2, "cluster", "1x1:cpu", fn);
  plan::Workload work;
  work.batch = lx_check_integer_value(lx_opt_number(L, 2, "batch", 8, fn), "batch", 1, 1 << 30, fn);
  work.seq = lx_check_integer_value(lx_opt_number(L, 2, "seq", 128, fn), "seq", 1, 1 << 24, fn);
  int steps = static_cast<int>(lx_check_integer_value(lx_opt_number(L, 2, "steps", 3, fn), "steps", 1, 1 << 30, fn));
  work.dtype = lx_opt_string(L, 2, "dtype", "float32", fn);
  plan::SearchOptions search;
  search.max_stages = static_cast<int>(
      lx_check_integer_value(lx_opt_number(L, 2, "max_stages", 0, fn), "max_stages", 0, 1 << 20, fn));

  std::string layer_costs = lx_opt_string(L, 2, "layer_costs", "ilp", fn);

  auto shape = plan::ModelShape::from_config(config, name);
  auto cluster = plan::Cluster::parse(cluster_spec, devices_dir());
  auto pricing = plan::price_layers(layer_costs, config, shape, cluster, work);
  shape.layouts = pricing.layouts;
  auto result = plan::plan_parallel(shape, cluster, work, search);
  result.model_source = source;
  if (std::string pick = lx_opt_string(L, 2, "pick", "", fn); !pick.empty()) result.pick(pick);
  plan::lay_out_layers(result, pricing);

  push_ranked(L, result.chosen(), static_cast<int>(shape.layers));
  set_string(L, "source", result.lua_source(steps));
  set_string(L, "summary", result.summary());
  set_string(L, "layer_layout", result.layer_layout_note);  // what the intra-op pass chose for each layer
  set_number(L, "ranks", cluster.devices());
  set_number(L, "search_s", result.search_s);
  set_number(L, "trace_s", result.trace_s);
  set_number(L, "parameters", static_cast<double>(shape.total_params));
  lua_createtable(L, static_cast<int>(result.ranked.size()), 0);
  for (size_t i = 0; i < result.ranked.size(); ++i) {
    push_ranked(L, result.ranked[i], static_cast<int>(shape.layers));
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  lua_setfield(L, -2, "alternatives");
  if (!result.unrestricted.empty()) {
    push_ranked(L, result.unrestricted.front(), static_cast<int>(shape.layers));
    lua_setfield(L, -2, "unrestricted");
  }
  lua_newtable(L);
  lua_pushcfunction(L, plan_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_setmetatable(L, -2);
  return 1;
}

// _autoshard(sch, {ranks =, dp =, cluster =, batch =, seq =, memory_mib =, zero =, solver =, sequence =,
// objective =, inputs = {...}}) -> {strategy = {path = style}, step_s =, replicated_s =, volume =, memory_mib =, replicated_memory_mib =, zero =, sequence =,
// solver =, variables =, constraints =, source =} (slapo.autoshard in init.lua)
int w_autoshard(lua_State* L) {
  const char* fn = "autoshard";
  auto sch = lx_check_live_schedule(L, 1, fn);
  lx_check_option_keys(L, 2,
                       {"ranks", "dp", "cluster", "batch", "seq", "memory_mib", "zero", "solver", "inputs", "sequence",
                        "objective"}, fn);
  int ranks = static_cast<int>(lx_check_integer_value(lx_opt_number(L, 2, "ranks", sch->world_size() > 1 ?
                                                                                     sch->world_size() : 2, fn),
                                                        "ranks", 2, 4096, fn));
  int dp = static_cast<int>(lx_check_integer_value(lx_opt_number(L, 2, "dp", 1, fn), "dp", 1, 65536, fn));
  auto cluster = plan::Cluster::parse(lx_opt_string(L, 2, "cluster", fmt::format("1x{}:h100", ranks * dp), fn),
                                      devices_dir());
  // the device's throughput on a large matmul of its first profiled dtype
  plan::IntraOpOptions o = plan::intra_op_options(cluster, ranks, dp, cluster.device.matmul.front().dtype);
  double batch = lx_opt_number_in(L, 2, "batch", 8, 1, 1e9, fn), seq = lx_opt_number_in(L, 2, "seq", 512, 1, 1e9, fn);
  o.tokens = batch * seq;  // every tensor scaled by tokens alone: the user's example's sequence
                           // length may equal a head's width, which the planner's prime length avoids
  o.solver = lx_opt_string(L, 2, "solver", "ilp", fn);
  o.objective = lx_opt_string(L, 2, "objective", "time", fn);
  double memory_mib = lx_opt_number_in(L, 2, "memory_mib", 0, 0, 1e12, fn);
  if (memory_mib > 0) o.memory_bytes = memory_mib * double(1 << 20);
  // zero = true | false | "auto" (the solver chooses)
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "zero");
    bool flag = lua_isboolean(L, -1), on = lua_toboolean(L, -1);
    lua_pop(L, 1);
    o.zero = flag ? (on ? "on" : "off") : lx_opt_string(L, 2, "zero", "auto", fn);
    // sequence = true: sequence parallelism (the module's tokens split over the ranks)
    o.sequence = lx_opt_bool(L, 2, "sequence", false, fn) ? "on" : "off";
  }
  // example inputs: given, else shaped like the module's last call (its leading tensors)
  Values examples;
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "inputs");
    if (lua_istable(L, -1))
      for (size_t i = 1; i <= lua_objlen(L, -1); ++i) {
        lua_rawgeti(L, -1, static_cast<int>(i));
        examples.emplace_back(lx_check_tensor(L, -1));
        lua_pop(L, 1);
      }
    lua_pop(L, 1);
  }
  if (examples.empty()) examples = examples_like_last_call(*sch->mod(), sch->where(), fn, "{inputs = {x, ...}}");
  auto result = plan::plan_intra_op(*sch->mod(), sch->where(), examples, o);
  lua_newtable(L);
  lua_newtable(L);
  for (auto& [path, style] : result.strategy) {
    lua_pushstring(L, style.c_str());
    lua_setfield(L, -2, path.c_str());
  }
  lua_setfield(L, -2, "strategy");
  set_number(L, "step_s", result.step_s);
  set_number(L, "replicated_s", result.replicated_s);
  set_number(L, "volume", result.volume);
  set_number(L, "memory_mib", result.memory_bytes / double(1 << 20));
  set_number(L, "replicated_memory_mib", result.replicated_memory_bytes / double(1 << 20));
  lua_pushboolean(L, result.zero);
  lua_setfield(L, -2, "zero");
  lua_pushboolean(L, result.sequence);
  lua_setfield(L, -2, "sequence");
  set_string(L, "solver", result.solver);
  set_number(L, "variables", result.variables);
  set_number(L, "constraints", result.constraints);
  set_number(L, "solve_s", result.solve_s);
  set_string(L, "source", result.lua_source());
  return 1;
}

}  // namespace

void open_plan(lua_State* L) {
  lx_set_func(L, "plan", w_plan);
  lx_set_func(L, "_autoshard", w_autoshard);
  // which solver autoshard's ILP gets in this build: "cbc", or "exhaustive" (built with -DSLAPO_CBC=OFF)
  lua_pushstring(L, plan::have_ilp_solver() ? "cbc" : "exhaustive");
  lua_setfield(L, -2, "ilp_solver");  // slapo.ilp_solver
}

}  // namespace slapo
