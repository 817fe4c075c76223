// slapo.plan(model, {cluster =, batch =, seq =, steps =}): the planner from Lua. Returns a table
// with the chosen plan's fields, its prediction, the alternatives and `source` (the plan as a Lua
// script); tostring gives the planner's table.
#include <cmath>

#include "core/error.h"
#include "lua/runtime.h"
#include "lua/wrap.h"
#include "models/zoo.h"
#include "plan/planner.h"

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

void push_ranked(lua_State* L, const plan::Ranked& r) {
  lua_newtable(L);
  set_number(L, "tp", r.candidate.tp);
  set_number(L, "dp", r.candidate.dp);
  set_number(L, "checkpoint", r.candidate.checkpoint ? 1.0 : 0.0);
  set_bool(L, "zero", r.candidate.zero);
  set_number(L, "step_s", r.estimate.step_s);
  set_number(L, "peak_gib", r.estimate.peak_bytes / double(1ull << 30));
  set_bool(L, "fits", r.estimate.fits);
  set_string(L, "verdict", r.verdict);
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
  lx_check_option_keys(L, 2, {"cluster", "batch", "seq", "steps"}, fn);
  std::string cluster_spec = lx_opt_string(L, 2, "cluster", "1x1:cpu", fn);
  plan::Workload work;
  work.batch = lx_check_integer_value(lx_opt_number(L, 2, "batch", 8, fn), "batch", 1, 1 << 30, fn);
  work.seq = lx_check_integer_value(lx_opt_number(L, 2, "seq", 128, fn), "seq", 1, 1 << 24, fn);
  int steps = static_cast<int>(lx_check_integer_value(lx_opt_number(L, 2, "steps", 3, fn), "steps", 1, 1 << 30, fn));

  auto shape = plan::ModelShape::from_config(config, name);
  auto cluster = plan::Cluster::parse(cluster_spec, plan::default_devices_dir());
  auto result = plan::plan_uniform(shape, cluster, work);
  result.model_source = source;

  push_ranked(L, result.chosen());
  set_string(L, "source", result.lua_source(steps));
  set_string(L, "summary", result.summary());
  set_number(L, "ranks", cluster.devices());
  lua_createtable(L, static_cast<int>(result.ranked.size()), 0);
  for (size_t i = 0; i < result.ranked.size(); ++i) {
    push_ranked(L, result.ranked[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  lua_setfield(L, -2, "alternatives");
  lua_newtable(L);
  lua_pushcfunction(L, plan_tostring);
  lua_setfield(L, -2, "__tostring");
  lua_setmetatable(L, -2);
  return 1;
}

}  // namespace

void open_plan(lua_State* L) { lx_set_func(L, "plan", w_plan); }

}  // namespace slapo
