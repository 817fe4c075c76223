// The planner's records pushed as plain Lua tables (plan_record.h).
#include "lua/plan_record.h"

#include <optional>

#include "core/error.h"
#include "lua/runtime.h"
#include "lua/state.h"
#include "lua/wrap.h"

namespace slapo {

namespace {

void set_number(lua_State* L, const char* key, double v) {
  lua_pushnumber(L, v);
  lua_setfield(L, -2, key);
}
void set_bool(lua_State* L, const char* key, bool v) {
  lua_pushboolean(L, v);
  lua_setfield(L, -2, key);
}
void set_string(lua_State* L, const char* key, const std::string& v) {
  lua_pushlstring(L, v.data(), v.size());
  lua_setfield(L, -2, key);
}

template <typename Map, typename Push>
void set_map(lua_State* L, const char* key, const Map& map, Push push) {
  lua_newtable(L);
  for (auto& [name, value] : map) {
    push(value);
    lua_setfield(L, -2, name.c_str());
  }
  lua_setfield(L, -2, key);
}

template <typename Set>
void set_list(lua_State* L, const char* key, const Set& items) {
  lua_createtable(L, static_cast<int>(items.size()), 0);
  int index = 0;
  for (auto& item : items) {
    lua_pushstring(L, item.c_str());
    lua_rawseti(L, -2, ++index);
  }
  lua_setfield(L, -2, key);
}

}  // namespace

void push_layer_layout(lua_State* L, const plan::IntraOpPlan& p) {
  auto string = [L](const std::string& v) { lua_pushstring(L, v.c_str()); };
  auto number = [L](double v) { lua_pushnumber(L, v); };
  lua_newtable(L);
  set_map(L, "strategy", p.strategy, string);
  set_map(L, "gather_axes", p.gather_axes, number);
  set_map(L, "groups", p.groups, number);
  set_list(L, "forked", p.forked);
  set_map(L, "parent_syncs", p.parent_syncs, string);
  set_map(L, "parent_gathers", p.parent_gathers, string);
  set_list(L, "token_params", p.token_params);
  set_bool(L, "sequence", p.sequence);
  set_number(L, "token_axis", static_cast<double>(p.token_axis));
  set_map(L, "types", p.types, string);
  set_map(L, "has_bias", p.has_bias, [L](bool v) { lua_pushboolean(L, v); });
  set_number(L, "step_s", p.step_s);
  set_number(L, "replicated_s", p.replicated_s);
  set_number(L, "volume", p.volume);
  set_number(L, "memory_mib", p.memory_bytes / double(1 << 20));
  set_number(L, "replicated_memory_mib", p.replicated_memory_bytes / double(1 << 20));
  set_bool(L, "zero", p.zero);
  set_string(L, "solver", p.solver);
  set_number(L, "variables", p.variables);
  set_number(L, "constraints", p.constraints);
  set_number(L, "solve_s", p.solve_s);
  set_number(L, "projections", p.projections);
  set_number(L, "ops", p.ops);
}

void push_ranked_plan(lua_State* L, const plan::Ranked& r, int layers) {
  const plan::Candidate& c = r.candidate;
  lua_newtable(L);
  set_number(L, "tp", c.tp);
  set_number(L, "dp", c.dp);
  set_number(L, "ep", c.ep);
  set_number(L, "cp", c.cp);
  set_string(L, "cp_method", c.cp_all_to_all ? "all_to_all" : "ring");  // sch:context_parallel's method
  set_number(L, "checkpoint", c.checkpoint ? 1.0 : 0.0);
  set_bool(L, "zero", c.zero);
  set_bool(L, "fully_sharded", c.fully_sharded);
  set_bool(L, "keep_gathered", c.keep_gathered);
  set_bool(L, "sequence", c.sequence);
  set_number(L, "pp", c.pp());
  set_number(L, "micro_batches", c.micro_batches);
  set_bool(L, "uniform_mesh", c.uniform_mesh());  // every stage on tp x dp with the plan's ZeRO setting
  auto stages = c.resolved(layers);
  lua_createtable(L, static_cast<int>(stages.size()), 0);
  for (size_t i = 0; i < stages.size(); ++i) {
    const plan::Stage& stage = stages[i];
    lua_newtable(L);
    set_number(L, "layers", stage.layers);
    set_number(L, "tp", stage.tp);
    set_number(L, "dp", stage.dp);
    set_number(L, "ep", stage.ep);
    set_number(L, "cp", stage.cp);
    set_bool(L, "checkpoint", stage.checkpoint);
    set_bool(L, "zero", stage.zero);
    set_bool(L, "fully_sharded", stage.fully_sharded);
    set_bool(L, "keep_gathered", stage.keep_gathered);
    set_bool(L, "sequence", stage.sequence);
    if (i < r.estimate.stages.size()) {  // a micro-batch's seconds and the peak, as the stage's estimate has them
      set_number(L, "time_s", r.estimate.stages[i].time_s());
      set_number(L, "peak_gib", plan::to_gib(r.estimate.stages[i].peak_bytes));
    }
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  lua_setfield(L, -2, "stages");
  set_string(L, "name", c.describe());  // as the table names it (and pick takes it)
  set_number(L, "step_s", r.estimate.step_s);
  // the step's parts, as the table's columns
  set_number(L, "compute_s", r.estimate.compute_s);
  set_number(L, "tp_comm_s", r.estimate.tp_comm_s);
  set_number(L, "p2p_s", r.estimate.p2p_s);
  set_number(L, "ep_comm_s", r.estimate.ep_comm_s);
  set_number(L, "dp_comm_s", r.estimate.dp_comm_s);
  set_number(L, "optimizer_s", r.estimate.optimizer_s);
  set_number(L, "peak_gib", plan::to_gib(r.estimate.peak_bytes));
  set_bool(L, "fits", r.estimate.fits);
  set_string(L, "verdict", r.verdict);
  set_string(L, "origin", r.origin);
}

void push_plan_record(lua_State* L, const plan::Plan& plan, int steps) {
  const int layers = static_cast<int>(plan.model.layers);
  lua_newtable(L);
  lua_newtable(L);
  set_string(L, "name", plan.model.name);
  set_string(L, "type", plan.model.type);
  set_number(L, "parameters", static_cast<double>(plan.model.total_params));
  set_number(L, "layers", layers);
  set_number(L, "experts", static_cast<double>(plan.model.experts));  // 0: a dense model
  lx_push_json(L, plan.model_source);
  lua_setfield(L, -2, "source");
  lua_setfield(L, -2, "model");
  lua_newtable(L);
  set_number(L, "nodes", plan.cluster.nodes);
  set_number(L, "per_node", plan.cluster.per_node);
  set_number(L, "devices", plan.cluster.devices());
  set_string(L, "device", plan.cluster.device.name);
  lua_setfield(L, -2, "cluster");
  lua_newtable(L);
  set_number(L, "batch", static_cast<double>(plan.work.batch));
  set_number(L, "seq", static_cast<double>(plan.work.seq));
  set_number(L, "documents", static_cast<double>(plan.work.documents));
  set_string(L, "dtype", plan.work.dtype);
  lua_setfield(L, -2, "work");
  set_number(L, "steps", steps);
  for (auto [key, list] : {std::pair{"ranked", &plan.ranked}, std::pair{"unrestricted", &plan.unrestricted}}) {
    lua_createtable(L, static_cast<int>(list->size()), 0);
    for (size_t i = 0; i < list->size(); ++i) {
      push_ranked_plan(L, (*list)[i], layers);
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    lua_setfield(L, -2, key);
  }
  if (plan.layer_layout) {
    push_layer_layout(L, *plan.layer_layout);
    lua_setfield(L, -2, "layer_layout");
  }
  set_string(L, "layer_layout_note", plan.layer_layout_note);
  if (plan.unpinned) {
    set_string(L, "pins", plan.pins);
    push_ranked_plan(L, *plan.unpinned, layers);
    lua_setfield(L, -2, "unpinned");
  }
  lua_createtable(L, static_cast<int>(plan.mesh_layouts.size()), 0);
  for (size_t i = 0; i < plan.mesh_layouts.size(); ++i) {
    const plan::Plan::MeshLayout& m = plan.mesh_layouts[i];
    lua_newtable(L);
    set_number(L, "tp", m.tp);
    set_number(L, "dp", m.dp);
    set_bool(L, "sequence", m.sequence);
    push_layer_layout(L, m.layout);
    lua_setfield(L, -2, "layout");
    set_string(L, "note", m.note);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  lua_setfield(L, -2, "mesh_layouts");
  set_string(L, "summary", plan.summary());
  set_number(L, "search_s", plan.search_s);
  set_number(L, "trace_s", plan.trace_s);
}

namespace {

// options.pin[key] as true or false; none when absent
std::optional<bool> pin_flag(lua_State* L, int pin, const char* key) {
  lua_getfield(L, pin, key);
  std::optional<bool> flag;
  if (lua_isboolean(L, -1)) flag = lua_toboolean(L, -1) != 0;
  else if (!lua_isnil(L, -1))
    throw Error(fmt::format("plan: pin.{} must be true or false, got {}", key, luaL_typename(L, -1)));
  lua_pop(L, 1);
  return flag;
}

// fn(i) with the array on the stack top's item i pushed, for each item
template <class Fn>
void for_each_item(lua_State* L, Fn fn) {
  for (size_t i = 1; i <= lua_objlen(L, -1); ++i) {
    lua_rawgeti(L, -1, static_cast<int>(i));
    fn(i);
    lua_pop(L, 1);
  }
}

// options.pin[key] as a count of 1 or more; 0 (free) when absent
int pin_count(lua_State* L, int pin, const char* key, const char* what) {
  lua_getfield(L, pin, key);
  const bool absent = lua_isnil(L, -1);
  lua_pop(L, 1);
  return absent ? 0 : static_cast<int>(lx_check_integer_value(lx_opt_number(L, pin, key, 0, "plan"), what, 1, 1 << 20,
                                                                 "plan"));
}

}  // namespace

plan::Pins read_plan_pins(lua_State* L, int pin) {
  plan::Pins pins;
  if (pin < 0) pin = lua_gettop(L) + pin + 1;  // the reads below push
  if (lua_isnil(L, pin)) return pins;
  if (!lua_istable(L, pin)) throw Error(fmt::format("plan: option 'pin' must be a table, got {}", luaL_typename(L, pin)));
  lx_check_option_keys(L, pin, {"tp", "dp", "micro_batches", "stages", "checkpoint", "zero", "fully_shard",
                                "reshard_after_forward", "sequence"}, "plan: pin");
  lua_getfield(L, pin, "tp");
  if (lua_isboolean(L, -1)) pins.tensor_parallel = lua_toboolean(L, -1) != 0;
  else if (!lua_isnil(L, -1)) pins.tp = pin_count(L, pin, "tp", "pin.tp (a size, or true: tensor parallel of any size)");
  lua_pop(L, 1);
  if (pins.tp == 1) pins.tensor_parallel = false;
  pins.dp = pin_count(L, pin, "dp", "pin.dp");
  pins.micro_batches = pin_count(L, pin, "micro_batches", "pin.micro_batches");
  lua_getfield(L, pin, "stages");
  if (lua_istable(L, -1)) {
    for_each_item(L, [&](size_t i) {
      if (!lua_isnumber(L, -1))
        throw Error(fmt::format("plan: pin.stages must list each stage's layer count, got {} at [{}]",
                                luaL_typename(L, -1), i));
      pins.stage_layers.push_back(static_cast<int>(
          lx_check_integer_value(lua_tonumber(L, -1), "pin.stages (layer counts)", 1, 1 << 20, "plan")));
    });
  } else if (!lua_isnil(L, -1)) {
    throw Error(fmt::format("plan: pin.stages must list each stage's layer count ({{8, 4}}), got {}",
                            luaL_typename(L, -1)));
  }
  lua_pop(L, 1);
  lua_getfield(L, pin, "checkpoint");
  if (lua_istable(L, -1)) {
    for_each_item(L, [&](size_t i) {
      if (!lua_isboolean(L, -1))
        throw Error(fmt::format("plan: pin.checkpoint lists each stage's checkpointing as true or false, got {} at [{}]",
                                luaL_typename(L, -1), i));
      pins.stage_checkpoint.push_back(lua_toboolean(L, -1) != 0);
    });
    lua_pop(L, 1);
  } else {
    lua_pop(L, 1);
    pins.checkpoint = pin_flag(L, pin, "checkpoint");
  }
  pins.zero = pin_flag(L, pin, "zero");
  pins.fully_sharded = pin_flag(L, pin, "fully_shard");
  if (auto reshard = pin_flag(L, pin, "reshard_after_forward")) {
    pins.keep_gathered = !*reshard;
    if (!pins.fully_sharded) pins.fully_sharded = true;  // the setting is fully_shard's
  }
  pins.sequence = pin_flag(L, pin, "sequence");
  return pins;
}

plan::Pins pins_from_schedule_file(const std::string& model, const std::string& file, std::vector<std::string>& unpriced) {
  LuaState lua;
  lua_State* L = lua.get();
  lua.push_stdlib_function("slapo.plan_pins", "from_file");
  lua_pushstring(L, model.c_str());
  lua_pushstring(L, file.c_str());
  try {
    lx_pcall(L, 2, 2);
  } catch (const std::exception& e) {
    throw Error(without_traceback(e.what()));  // the file's own mistake: its line, not our stack
  }
  plan::Pins pins = read_plan_pins(L, -2);
  for (size_t i = 1; lua_istable(L, -1) && i <= lua_objlen(L, -1); ++i) {
    lua_rawgeti(L, -1, static_cast<int>(i));
    unpriced.emplace_back(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  return pins;
}

std::string write_plan_script(const plan::Plan& plan, int steps) {
  LuaState lua;
  lua_State* L = lua.get();
  lua.push_stdlib_function("slapo.plan_script", "write");
  push_plan_record(L, plan, steps);
  lx_pcall(L, 1, 1);
  size_t size = 0;
  const char* text = lua_tolstring(L, -1, &size);
  std::string source = text ? std::string(text, size) : std::string();
  lua_pop(L, 1);
  return source;
}

}  // namespace slapo
