// slapo.Pipeline: what slapo.build returns for a schedule with cut stages.
#include <algorithm>
#include <unordered_map>

#include "core/error.h"
#include "distributed/group.h"
#include "lua/lua_module.h"
#include "lua/runtime.h"
#include "lua/wrap.h"
#include "primitives/pipeline.h"

namespace slapo {

namespace {

using PipelinePtr = std::shared_ptr<Pipeline>;


int w_Pipeline_gc(lua_State* L) {
  static_cast<PipelinePtr*>(luaL_checkudata(L, 1, "slapo.Pipeline"))->~PipelinePtr();
  return 0;
}

int w_Pipeline_tostring(lua_State* L) {
  lua_pushstring(L, lx_check_pipeline(L, 1).describe().c_str());
  return 1;
}

// The tensors from index 2 on, and the labels and keyword tensors of a trailing
// {labels = t, position_ids = p, ...}.
Values batch_args(lua_State* L, at::Tensor* labels, NamedTensors* keywords, const char* fn) {
  int top = lua_gettop(L);
  if (top >= 2 && lua_istable(L, top)) {
    lua_pushnil(L);
    while (lua_next(L, top)) {
      if (lua_type(L, -2) != LUA_TSTRING || !lx_is_tensor(L, -1))
        throw Error(fmt::format("{}: the table after the inputs holds tensors by name ({{labels = t}}, and keywords of "
                                "the model such as position_ids), got {} = {}",
                                fn, luaL_typename(L, -2), luaL_typename(L, -1)));
      std::string name = lua_tostring(L, -2);
      if (name == "labels")
        *labels = lx_check_tensor(L, -1);
      else
        keywords->emplace_back(name, lx_check_tensor(L, -1));
      lua_pop(L, 1);
    }
    std::sort(keywords->begin(), keywords->end(), [](auto& a, auto& b) { return a.first < b.first; });
    --top;
  }
  Values inputs;
  for (int i = 2; i <= top; ++i) {
    if (!lx_is_tensor(L, i))
      throw Error(fmt::format("{}: argument {} must be a tensor (the model's inputs, then {{labels = t}}), got {}", fn,
                              i - 1, luaL_typename(L, i)));
    inputs.emplace_back(lx_check_tensor(L, i));
  }
  if (inputs.empty()) throw Error(fmt::format("{}: pass the model's inputs, e.g. pipe:step(ids, {{labels = ids}})", fn));
  return inputs;
}

// pipe:step(x, ..., {labels = t, position_ids = p}) -> the batch's mean loss (every rank);
// gradients accumulate
int w_Pipeline_step(lua_State* L) {
  auto& p = lx_check_pipeline(L, 1);
  at::Tensor labels;
  NamedTensors keywords;
  Values inputs = batch_args(L, &labels, &keywords, "pipeline:step");
  lua_pushnumber(L, p.step(inputs, labels, keywords));
  return 1;
}

// pipe:prepare(x, ..., {position_ids = p}): trace and split for batches of this shape and these
// keywords (parameters() needs it)
int w_Pipeline_prepare(lua_State* L) {
  auto& p = lx_check_pipeline(L, 1);
  at::Tensor labels;
  NamedTensors keywords;
  Values inputs = batch_args(L, &labels, &keywords, "pipeline:prepare");
  p.prepare(inputs, keywords);
  lua_settop(L, 1);
  return 1;
}

int push_tensors(lua_State* L, const std::vector<at::Tensor>& tensors) {
  lua_createtable(L, static_cast<int>(tensors.size()), 0);
  for (size_t i = 0; i < tensors.size(); ++i) {
    lx_push_tensor(L, tensors[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}

int w_Pipeline_parameters(lua_State* L) { return push_tensors(L, lx_check_pipeline(L, 1).parameters()); }
// pipe:named_parameters() -> iterator over this stage's (name, parameter)
int w_Pipeline_named_parameters(lua_State* L) {
  auto named = lx_check_pipeline(L, 1).named_parameters();
  lua_createtable(L, static_cast<int>(2 * named.size()), 0);
  for (size_t i = 0; i < named.size(); ++i) {
    lua_pushstring(L, named[i].first.c_str());
    lua_rawseti(L, -2, static_cast<int>(2 * i + 1));
    lx_push_tensor(L, named[i].second);
    lua_rawseti(L, -2, static_cast<int>(2 * i + 2));
  }
  return lx_push_pairs_iterator(L);
}

int w_Pipeline_leaves(lua_State* L) { return lx_push_strings(L, lx_check_pipeline(L, 1).stage_leaves()); }
int w_Pipeline_shared_parameters(lua_State* L) { return lx_push_strings(L, lx_check_pipeline(L, 1).shared_parameters()); }
int w_Pipeline_shared_counted_elsewhere(lua_State* L) {
  return lx_push_strings(L, lx_check_pipeline(L, 1).shared_counted_elsewhere());
}
int w_Pipeline_released_parameters(lua_State* L) { return lx_push_strings(L, lx_check_pipeline(L, 1).released_parameters()); }

// pipe:num_params([{gathered = true}]) -> this rank's stages' parameters; gathered: those fully_shard
// slices counted whole, as each call computes with them (MFU's count)
int w_Pipeline_num_params(lua_State* L) {
  auto& pipe = lx_check_pipeline(L, 1);
  lx_check_arg_count(L, 1, "num_params", "pipe:num_params([{gathered = true}])", 1);
  lx_check_option_keys(L, 2, {"gathered"}, "num_params");
  const bool gathered = lx_opt_bool(L, 2, "gathered", false, "num_params");
  auto whole = gathered ? fully_sharded_numels(*pipe.module()) : std::unordered_map<const c10::TensorImpl*, int64_t>{};
  double n = 0;
  for (auto& p : pipe.parameters()) {
    auto found = whole.find(p.unsafeGetTensorImpl());
    n += static_cast<double>(found == whole.end() ? p.numel() : found->second);
  }
  lua_pushnumber(L, n);
  return 1;
}

// pipe:stats() -> {wall_s, busy_s, bubble, ideal_bubble, micro_batches, stages} of the last step
int w_Pipeline_stats(lua_State* L) {
  auto& s = lx_check_pipeline(L, 1).runner().last_stats();
  lua_newtable(L);
  auto set = [L](const char* key, double v) {
    lua_pushnumber(L, v);
    lua_setfield(L, -2, key);
  };
  set("wall_s", s.wall_s);
  set("busy_s", s.busy_s);
  set("bubble", s.wall_s > 0 ? 1.0 - s.busy_s / s.wall_s : 0.0);
  set("ideal_bubble", s.ideal_bubble());
  set("micro_batches", s.micro_batches);
  set("stages", s.stages);
  return 1;
}

int pipeline_fields(lua_State* L) {
  auto& p = lx_check_pipeline(L, 1);
  std::string key = luaL_checkstring(L, 2);
  if (key == "stage") lua_pushnumber(L, p.stage());
  else if (key == "stages") lua_pushnumber(L, p.stages());
  else if (key == "micro_batches") lua_pushnumber(L, p.micro_batches());
  else if (key == "schedule") lua_pushstring(L, dist::pipeline_schedule_name(p.runner().schedule()));
  else if (key == "module") lx_push_module(L, p.module());
  else if (key == "on_meshes") lua_pushboolean(L, !p.runner().meshes().empty());
  else if (key == "meshes") {  // {{tp =, dp =}, ...} in stage order; nil: every stage one rank of the group
    auto& meshes = p.runner().meshes();
    if (meshes.empty()) {
      lua_pushnil(L);
      return 1;
    }
    lua_createtable(L, static_cast<int>(meshes.size()), 0);
    for (size_t i = 0; i < meshes.size(); ++i) {
      lua_createtable(L, 0, 2);
      lua_pushinteger(L, meshes[i].tp);
      lua_setfield(L, -2, "tp");
      lua_pushinteger(L, meshes[i].dp);
      lua_setfield(L, -2, "dp");
      lua_rawseti(L, -2, static_cast<int>(i) + 1);
    }
  }
  else if (key == "group") lx_push_group(L, p.runner().group());  // on stage meshes: the world
  else if (key == "expert_dp_group") {  // false: told that no other rank holds this rank's experts
    if (!p.experts_replicated()) lua_pushboolean(L, 0);
    else lx_push_group(L, p.expert_data_parallel_group());
  }
  else if (key == "dp_group") lx_push_group(L, p.data_parallel_group());
  else lua_pushnil(L);
  return 1;
}

const luaL_Reg pipeline_methods[] = {{"step", w_Pipeline_step},
                                     {"prepare", w_Pipeline_prepare},
                                     {"parameters", w_Pipeline_parameters},
                                     {"named_parameters", w_Pipeline_named_parameters},
                                     {"num_params", w_Pipeline_num_params},
                                     {"leaves", w_Pipeline_leaves},
                                     {"shared_parameters", w_Pipeline_shared_parameters},
                                     {"released_parameters", w_Pipeline_released_parameters},
                                     {"shared_counted_elsewhere", w_Pipeline_shared_counted_elsewhere},
                                     {"stats", w_Pipeline_stats},
                                     {nullptr, nullptr}};
const luaL_Reg pipeline_meta[] = {{"__gc", w_Pipeline_gc}, {"__tostring", w_Pipeline_tostring}, {nullptr, nullptr}};

}  // namespace

Pipeline& lx_check_pipeline(lua_State* L, int idx) {
  return **static_cast<PipelinePtr*>(luaL_checkudata(L, idx, "slapo.Pipeline"));
}

bool lx_save_if_pipeline(lua_State* L, int idx, const std::string& dir, int64_t max_shard_bytes) {
  if (!luaL_testudata(L, idx, "slapo.Pipeline")) return false;
  save_pipeline(lx_check_pipeline(L, idx), dir, max_shard_bytes);
  return true;
}

namespace {

// pipeline.meshes = {{tp = 2, dp = 1}, {tp = 1, dp = 2}, ...}: each stage's mesh, ranks in order.
std::vector<dist::StageMesh> stage_meshes(lua_State* L, int pipeline) {
  std::vector<dist::StageMesh> out;
  lua_getfield(L, pipeline, "meshes");
  int t = lua_gettop(L);
  if (!lua_isnil(L, t)) {
    if (!lua_istable(L, t) || lua_objlen(L, t) < 2)
      throw Error(fmt::format("build: pipeline.meshes must list two stage meshes or more, {{{{tp =, dp =}}, ...}}, got "
                              "{}", lua_istable(L, t) ? "fewer" : luaL_typename(L, t)));
    int first = 0;
    for (int i = 1; i <= static_cast<int>(lua_objlen(L, t)); ++i) {
      lua_rawgeti(L, t, i);
      int m = lua_gettop(L);
      if (!lua_istable(L, m))
        throw Error(fmt::format("build: pipeline.meshes[{}] must be a table {{tp =, dp =}}, got {}", i, luaL_typename(L, m)));
      lx_check_option_keys(L, m, {"tp", "dp"}, fmt::format("build: pipeline.meshes[{}]", i).c_str());
      auto size = [&](const char* key) {
        return static_cast<int>(lx_check_integer_value(lx_opt_number(L, m, key, 1, "build"),
                                                       fmt::format("pipeline.meshes[{}].{}", i, key).c_str(), 1,
                                                       1 << 20, "build"));
      };
      dist::StageMesh mesh{first, size("tp"), size("dp")};
      first += mesh.size();
      out.push_back(mesh);
      lua_pop(L, 1);
    }
  }
  lua_pop(L, 1);
  return out;
}

}  // namespace

void lx_push_pipeline(lua_State* L, std::shared_ptr<Schedule> root, int opts) {
  PipelineOptions o;
  if (lua_istable(L, opts)) {
    lua_getfield(L, opts, "pipeline");
    int t = lua_gettop(L);
    if (lua_istable(L, t)) {
      lua_getfield(L, t, "group");
      if (!lua_isnil(L, -1)) o.group = lx_group_arg(L, lua_gettop(L), "build: option pipeline.group");
      lua_pop(L, 1);
      lx_check_option_keys(L, t, {"group", "micro_batches", "dp_group", "expert_dp_group", "bucket_mb",
                                  "release_other_stages", "schedule", "loss", "meshes"}, "build: pipeline");
      o.meshes = stage_meshes(L, t);
      lua_getfield(L, t, "micro_batches");
      bool given = !lua_isnil(L, -1);
      lua_pop(L, 1);
      if (given)  // absent: one per stage
        o.micro_batches = static_cast<int>(lx_check_integer_value(lx_opt_number(L, t, "micro_batches", 0, "build"),
                                                                  "pipeline.micro_batches", 1, 1 << 20, "build"));
      lua_getfield(L, t, "dp_group");
      if (!lua_isnil(L, -1)) o.dp_group = lx_group_arg(L, lua_gettop(L), "build: option pipeline.dp_group");
      lua_pop(L, 1);
      lua_getfield(L, t, "expert_dp_group");  // false: no other rank holds this rank's experts
      if (lua_isboolean(L, -1) && !lua_toboolean(L, -1)) o.experts_replicated = false;
      else if (!lua_isnil(L, -1)) o.expert_dp_group = lx_group_arg(L, lua_gettop(L), "build: option pipeline.expert_dp_group");
      lua_pop(L, 1);
      o.bucket_bytes = static_cast<int64_t>(lx_opt_number(L, t, "bucket_mb", 25, "build") * (1 << 20));
      o.release_other_stages = lx_opt_bool(L, t, "release_other_stages", true, "build");
      o.schedule = dist::parse_pipeline_schedule(lx_opt_string(L, t, "schedule", "1f1b", "build"), "build: pipeline.schedule");
      lua_getfield(L, t, "loss");
      if (lua_isfunction(L, -1)) {
        auto fn = LuaRef::from_stack(L, -1);
        o.loss = [fn](const at::Tensor& output, const Value& target) {
          lua_State* T = fn->push("pipeline loss");
          int top = lua_gettop(T) - 1;
          lx_push_tensor(T, output);
          lx_push_value(T, target);
          lx_pcall(T, 2, 1);
          if (!lx_is_tensor(T, -1)) {
            std::string got = luaL_typename(T, -1);
            lua_settop(T, top);
            throw Error(fmt::format("pipeline: the loss function returned a {}, not a tensor", got));
          }
          at::Tensor loss = lx_check_tensor(T, -1);
          lua_settop(T, top);
          return loss;
        };
      } else if (!lua_isnil(L, -1)) {
        throw Error(fmt::format("build: pipeline.loss must be a function(output, labels), got {}", luaL_typename(L, -1)));
      }
      lua_pop(L, 1);
    } else if (!lua_isnil(L, t)) {
      throw Error(fmt::format("build: pipeline must be a table {{group =, micro_batches =, schedule =, loss =}}, got {}",
                              luaL_typename(L, t)));
    }
    lua_pop(L, 1);
  }
  if (!o.group && o.meshes.empty() && root->group()->size() > 1)
    throw Error("build: the schedule shards over several ranks, so name the pipeline's ranks: "
                "slapo.build(sch, {pipeline = {group = layout.pp_group}})");
  auto pipeline = std::make_shared<Pipeline>(std::move(root), std::move(o));
  void* p = lua_newuserdata(L, sizeof(PipelinePtr));
  new (p) PipelinePtr(std::move(pipeline));
  luaL_getmetatable(L, "slapo.Pipeline");
  lua_setmetatable(L, -2);
}

void open_pipeline(lua_State* L) {
  lx_new_class(L, "slapo.Pipeline", pipeline_methods, pipeline_meta, pipeline_fields);
}

}  // namespace slapo
