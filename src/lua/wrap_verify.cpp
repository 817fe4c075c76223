// slapo.build and the core of slapo.verify (stdlib/slapo/init.lua adds the Lua-facing shape).
#include <algorithm>

#include "core/error.h"
#include "core/schedule.h"
#include "lua/lua_module.h"
#include "lua/runtime.h"
#include "lua/state.h"
#include "lua/wrap.h"
#include "primitives/pipeline.h"
#include "primitives/schedule_snapshot.h"
#include "primitives/verify.h"

namespace slapo {

namespace {

// build(sch, {init_weights = nil | true | false | function(path, module), seed = 0})
int w_build(lua_State* L) {
  auto s = lx_check_schedule(L, 1);
  ScheduleBuildOptions o;
  lx_check_option_keys(L, 2, {"init_weights", "seed", "pipeline"}, "build");
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "init_weights");
    if (lua_isboolean(L, -1)) o.init = lua_toboolean(L, -1) ? ScheduleBuildOptions::All : ScheduleBuildOptions::None;
    else if (lua_isfunction(L, -1)) {
      auto fn = LuaRef::from_stack(L, -1);
      o.init_fn = [fn](const std::string& path, std::shared_ptr<Module> m) {
        lua_State* T = fn->push("build: init_weights");
        lua_pushstring(T, path.c_str());
        std::string type = m->type_name();
        lx_push_module(T, std::move(m));
        try {
          lx_pcall(T, 2, 0);
        } catch (const LuaError& e) {
          throw Error(fmt::format("build: init_weights failed on {} ({}): {}",
                                  path.empty() ? "the root" : "'" + path + "'", type, without_traceback(e.what())));
        }
      };
    } else if (!lua_isnil(L, -1))
      throw Error(fmt::format("build: init_weights must be true, false or a function(path, module), got {}",
                              luaL_typename(L, -1)));
    lua_pop(L, 1);
    o.seed = static_cast<uint64_t>(lx_check_integer_value(lx_opt_number(L, 2, "seed", 0, "build"), "seed", 0, 9.0e15, "build"));
  }
  if (pipeline_cuts(*s).empty() && lua_istable(L, 2)) {  // options for a pipeline the schedule never cut
    lua_getfield(L, 2, "pipeline");
    bool given = !lua_isnil(L, -1);
    lua_pop(L, 1);
    if (given)
      throw Error("build: pipeline options were given, but the schedule has no cut_pipeline_stage; cut the stages "
                  "first (sub:cut_pipeline_stage() or slapo.parallel.cut_evenly), or drop pipeline");
  }
  if (pipeline_cuts(*s).empty()) {
    lx_push_module(L, build(*s, o));
  } else {  // a stage reads from a checkpoint only what it runs, once the first trace has named it
    o.defer_checkpoint_reads = true;
    build(*s, o);
    lx_push_pipeline(L, s, 2);
  }
  return 1;
}

Values inputs_arg(lua_State* L, int idx) {
  luaL_checktype(L, idx, LUA_TTABLE);
  Values inputs;
  for (size_t i = 1; i <= lua_objlen(L, idx); ++i) {
    lua_rawgeti(L, idx, static_cast<int>(i));
    inputs.push_back(lx_to_value(L, -1));
    lua_pop(L, 1);
  }
  return inputs;
}

VerifyOptions verify_options(lua_State* L, int idx) {
  VerifyOptions o;
  lx_check_option_keys(L, idx, {"rtol", "atol", "backward", "train", "seed", "labels", "allow_missing"}, "verify");
  o.rtol = lx_opt_number_in(L, idx, "rtol", o.rtol, 0, 1e6, "verify");
  o.atol = lx_opt_number_in(L, idx, "atol", o.atol, -1e6, 1e6, "verify");  // negative: scaled to the values
  o.backward = lx_opt_bool(L, idx, "backward", true, "verify");
  o.train = lx_opt_bool(L, idx, "train", false, "verify");
  o.seed = static_cast<uint64_t>(lx_check_integer_value(lx_opt_number(L, idx, "seed", 0, "verify"), "seed", 0, 9.0e15, "verify"));
  if (lua_istable(L, idx)) {
    lua_getfield(L, idx, "allow_missing");
    if (lua_isboolean(L, -1)) o.allow_any_missing = lua_toboolean(L, -1);
    else if (lua_istable(L, -1)) o.allow_missing = lx_check_strings(L, lua_gettop(L), "verify", "allow_missing");
    else if (!lua_isnil(L, -1))
      throw Error(fmt::format("verify: allow_missing must be true or a list of parameter names, got {}",
                              luaL_typename(L, -1)));
    lua_pop(L, 1);
  }
  return o;
}

int push_report(lua_State* L, const VerifyReport& r) {
  lua_newtable(L);
  lua_pushnumber(L, r.outputs);
  lua_setfield(L, -2, "outputs");
  lua_pushnumber(L, r.params);
  lua_setfield(L, -2, "params");
  lua_pushnumber(L, r.gradients);
  lua_setfield(L, -2, "gradients");
  lua_pushnumber(L, r.no_gradient);
  lua_setfield(L, -2, "no_gradient");
  lua_pushnumber(L, r.skipped_params);
  lua_setfield(L, -2, "skipped_params");
  lx_push_strings(L, r.skipped);
  lua_setfield(L, -2, "skipped");
  lua_pushnumber(L, r.max_output_diff);
  lua_setfield(L, -2, "max_output_diff");
  lua_pushnumber(L, r.max_grad_diff);
  lua_setfield(L, -2, "max_grad_diff");
  return 1;
}

// _verify(sch, reference_module, inputs_array, opts) -> report table
int w_verify(lua_State* L) {
  auto s = lx_check_schedule(L, 1);
  auto ref = lx_check_module(L, 2);
  return push_report(L, verify_against(*s, *ref, inputs_arg(L, 3), verify_options(L, 4)));
}

// _verify_pipeline(pipe, reference_module, inputs_array, opts) -> report table; opts.labels
// defaults to the first input (a causal LM's token ids)
int w_verify_pipeline(lua_State* L) {
  auto& pipe = lx_check_pipeline(L, 1);
  auto ref = lx_check_module(L, 2);
  Values inputs = inputs_arg(L, 3);
  NamedTensors keywords;  // a trailing table of the model's keywords: {position_ids = p}
  if (!inputs.empty() && inputs.back().isGenericDict()) {
    for (auto& entry : inputs.back().toGenericDict()) {
      if (!entry.value().isTensor())
        throw Error(fmt::format("verify: a pipeline's keywords are tensors (position_ids = p, ...); {} is a {}",
                                entry.key().toStringRef(), entry.value().tagKind()));
      keywords.emplace_back(entry.key().toStringRef(), entry.value().toTensor());
    }
    std::sort(keywords.begin(), keywords.end(), [](auto& a, auto& b) { return a.first < b.first; });
    inputs.pop_back();
  }
  if (inputs.empty() || !inputs[0].isTensor()) throw Error("verify: a pipeline takes a tensor as its first input");
  at::Tensor labels = inputs[0].toTensor();
  if (lua_istable(L, 4)) {
    lua_getfield(L, 4, "labels");
    if (!lua_isnil(L, -1)) labels = lx_check_tensor(L, -1);
    lua_pop(L, 1);
  }
  return push_report(L, verify_pipeline(pipe, *ref, inputs, labels, verify_options(L, 4), keywords));
}

// _schedule_snapshot(sch) -> a snapshot whose :restore() puts the schedule back as it was and
// returns how many primitives that undid (verify's rollback).
using SnapshotPtr = std::shared_ptr<ScheduleSnapshot>;

int w_schedule_snapshot(lua_State* L) {
  auto s = lx_check_schedule(L, 1);
  new (lua_newuserdata(L, sizeof(SnapshotPtr))) SnapshotPtr(std::make_shared<ScheduleSnapshot>(*s));
  luaL_getmetatable(L, "slapo.ScheduleSnapshot");
  lua_setmetatable(L, -2);
  return 1;
}

int w_ScheduleSnapshot_restore(lua_State* L) {
  auto& snapshot = **static_cast<SnapshotPtr*>(luaL_checkudata(L, 1, "slapo.ScheduleSnapshot"));
  size_t undone = snapshot.primitives_since();
  snapshot.restore();
  lua_pushnumber(L, static_cast<lua_Number>(undone));
  return 1;
}

int w_ScheduleSnapshot_gc(lua_State* L) {
  static_cast<SnapshotPtr*>(luaL_checkudata(L, 1, "slapo.ScheduleSnapshot"))->~SnapshotPtr();
  return 0;
}

const luaL_Reg snapshot_methods[] = {{"restore", w_ScheduleSnapshot_restore}, {nullptr, nullptr}};
const luaL_Reg snapshot_meta[] = {{"__gc", w_ScheduleSnapshot_gc}, {nullptr, nullptr}};

}  // namespace

void open_verify(lua_State* L) {
  lx_new_class(L, "slapo.ScheduleSnapshot", snapshot_methods, snapshot_meta, nullptr);
  lx_set_func(L, "_schedule_snapshot", w_schedule_snapshot);
  lx_set_func(L, "build", w_build);
  lx_set_func(L, "_verify", w_verify);
  lx_set_func(L, "_verify_pipeline", w_verify_pipeline);
}

}  // namespace slapo
