// slapo.Schedule: sch["a.b"], fields path/name/mod/parent, named_schedules, tostring, log.
#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/schedule.h"
#include "distributed/gradient_reductions.h"
#include "distributed/group.h"
#include "distributed/world.h"
#include "graph/traced_graph.h"
#include "lua/lua_module.h"
#include "lua/runtime.h"
#include "lua/wrap.h"
#include "primitives/pipeline.h"
#include "primitives/primitives.h"

namespace slapo {

std::shared_ptr<Schedule>& lx_check_live_schedule(lua_State* L, int idx, const char* fn) {
  auto& s = lx_check_schedule(L, idx);
  std::string why = s->stale_reason();
  if (!why.empty())
    throw Error(fmt::format("{}: the handle for '{}' is stale: {}, so the module it named is no longer in the "
                            "model; index the schedule again (sch[\"{}\"])",
                            fn, s->path(), why, s->path()));
  return s;
}

namespace {

// "shard on 'transformer.h.0.mlp.c_fc'": what an option error of a primitive is prefixed with.
std::string on(const char* primitive, const Schedule& s) { return fmt::format("{} on {}", primitive, s.where()); }

// A primitive given more arguments than it takes is refused, not run with the extras dropped:
// `sub:decompose(5)` may mean something the primitive does not do. `usage` is its whole form.
void check_no_more_args(lua_State* L, int last, const Schedule& s, const char* primitive, const char* usage) {
  lx_check_arg_count(L, last - 1, on(primitive, s).c_str(), usage, /*self=*/1);
}

// The parameter name at `idx` (a number reads as its digits, and the primitive then says no such
// parameter); anything else is an error that names the primitive, the module and its parameters.
std::string param_name_arg(lua_State* L, int idx, const Schedule& s, const char* primitive) {
  if (lua_type(L, idx) == LUA_TSTRING || lua_type(L, idx) == LUA_TNUMBER) return lua_tostring(L, idx);
  std::vector<std::string> names;
  for (auto& p : s.mod()->named_parameters(/*recurse=*/false)) names.push_back(p.key());
  throw Error(fmt::format("{}: the parameter name must be a string, got {} (parameters: {})", on(primitive, s),
                          lua_isnoneornil(L, idx) ? "nothing" : luaL_typename(L, idx), join_or_none(names)));
}

int w_Schedule_gc(lua_State* L) {
  using Ptr = std::shared_ptr<Schedule>;
  lx_check_schedule(L, 1).~Ptr();
  return 0;
}

int w_Schedule_tostring(lua_State* L) {
  lua_pushstring(L, lx_check_schedule(L, 1)->to_string().c_str());
  return 1;
}

int w_Schedule_eq(lua_State* L) {
  lua_pushboolean(L, luaL_testudata(L, 1, "slapo.Schedule") && luaL_testudata(L, 2, "slapo.Schedule") &&
                         lx_check_schedule(L, 1) == lx_check_schedule(L, 2));
  return 1;
}

// ---- primitives ----

// The call site of a primitive: "file:line" of the Lua caller, and its arguments as Lua source.
// Values with no literal form (modules, functions, tensors) print as args[N]; sch:log_args()
// returns them, so load(sch:log())()(sch2, sch:log_args()) replays a log that holds them.
CallSite call_site(lua_State* L, const Schedule& sch, int first, int last) {
  CallSite site;
  luaL_where(L, 1);
  site.source = lua_tostring(L, -1);
  lua_pop(L, 1);
  while (!site.source.empty() && (site.source.back() == ' ' || site.source.back() == ':')) site.source.pop_back();
  while (last >= first && lua_isnoneornil(L, last)) --last;
  for (int i = first; i <= last; ++i) {
    int t = lua_type(L, i);
    if (t == LUA_TNIL || t == LUA_TBOOLEAN || t == LUA_TNUMBER || t == LUA_TSTRING ||
        (t == LUA_TTABLE && lua_getmetatable(L, i) == 0)) {
      try {
        site.lua_args.push_back(lua_literal(lx_to_value(L, i)));
        continue;
      } catch (const std::exception&) {
        // falls through: a table holding tensors or functions is kept as an object
      }
    } else if (t == LUA_TTABLE) {
      lua_pop(L, 1);  // the metatable
    }
    lua_getfield(L, LUA_REGISTRYINDEX, "slapo.log_args");
    lua_pushlightuserdata(L, const_cast<ScheduleLog*>(&sch.log()));
    lua_rawget(L, -2);
    if (lua_isnil(L, -1)) {
      lua_pop(L, 1);
      lua_newtable(L);
      lua_pushlightuserdata(L, const_cast<ScheduleLog*>(&sch.log()));
      lua_pushvalue(L, -2);
      lua_rawset(L, -4);
    }
    int n = static_cast<int>(lua_objlen(L, -1)) + 1;
    lua_pushvalue(L, i);
    lua_rawseti(L, -2, n);
    lua_pop(L, 2);
    site.lua_args.push_back(fmt::format("args[{}]", n));
  }
  return site;
}

int w_Schedule_log_args(lua_State* L) {
  auto& s = lx_check_schedule(L, 1);
  lua_getfield(L, LUA_REGISTRYINDEX, "slapo.log_args");
  lua_pushlightuserdata(L, &s->log());
  lua_rawget(L, -2);
  if (lua_isnil(L, -1)) lua_newtable(L);
  return 1;
}

// The node names of a subgraph argument: a match from find (an array of nodes) or an array of
// matches (horizontal: q, k and v), merged.
void collect_node_names(lua_State* L, int idx, SubgraphNames& out, const char* caller, int depth = 0) {
  if (idx < 0) idx = lua_gettop(L) + idx + 1;
  if (lua_type(L, idx) == LUA_TSTRING && depth > 0) {  // a node name, as the log writes them
    out.emplace_back(lua_tostring(L, idx));
    return;
  }
  if (!lua_istable(L, idx) || depth > 2)
    throw Error(fmt::format("{}: a subgraph is what find returns (an array of nodes, or of such arrays), got {}", caller,
                            luaL_typename(L, idx)));
  lua_getfield(L, idx, "name");
  if (lua_isstring(L, -1)) {
    out.emplace_back(lua_tostring(L, -1));
    lua_pop(L, 1);
    return;
  }
  lua_pop(L, 1);
  if (depth == 0 && lua_objlen(L, idx) == 0) {  // an options table in the subgraph's place?
    lua_pushnil(L);
    if (lua_next(L, idx)) {
      std::string key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : luaL_typename(L, -2);
      lua_pop(L, 2);
      throw Error(fmt::format("{}: a subgraph is what find returns (an array of nodes), got a table with key '{}' "
                              "(options come after the subgraph)", caller, key));
    }
  }
  for (size_t i = 1; i <= lua_objlen(L, idx); ++i) {
    lua_rawgeti(L, idx, static_cast<int>(i));
    collect_node_names(L, -1, out, caller, depth + 1);
    lua_pop(L, 1);
  }
}

// The names, and the argument at `idx` replaced by their array, so the log shows {"%40", "%42"}.
SubgraphNames subgraph_arg(lua_State* L, int idx, const char* caller) {
  SubgraphNames names;
  collect_node_names(L, idx, names, caller);
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  if (names.empty()) throw Error(fmt::format("{}: the subgraph is empty (find matched nothing?)", caller));
  lua_createtable(L, static_cast<int>(names.size()), 0);
  for (size_t i = 0; i < names.size(); ++i) {
    lua_pushstring(L, names[i].c_str());
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  lua_replace(L, idx);
  return names;
}

// sub:replace(module_or_fn, subgraph, {check = true, name = "Child"}) -> the new child's schedule
int replace_subgraph_call(lua_State* L, const std::shared_ptr<Schedule>& s) {
  if (lua_isfunction(L, 2)) {  // a function becomes a module calling it
    lua_getglobal(L, "slapo");
    lua_getfield(L, -1, "_function_module");
    lua_pushvalue(L, 2);
    lx_pcall(L, 1, 1);
    lua_replace(L, 2);
    lua_pop(L, 1);
  }
  if (!lx_is_module(L, 2))
    throw Error(fmt::format("replace: the replacement for a subgraph of {} must be a module or a function, got {}",
                            s->where(), luaL_typename(L, 2)));
  auto names = subgraph_arg(L, 3, on("replace", *s).c_str());
  lx_check_option_keys(L, 4, {"check", "name"}, "replace");
  bool check = lx_opt_bool(L, 4, "check", true, "replace");
  std::string child_name = lx_opt_string(L, 4, "name", "", "replace");
  std::string child = replace_subgraph(*s, lx_check_module(L, 2), names, check, call_site(L, *s, 2, 4), child_name);
  lx_push_schedule(L, s->at(child));
  return 1;
}

int w_Schedule_replace(lua_State* L) {
  auto s = lx_check_live_schedule(L, 1, "replace");
  if (!lua_isnoneornil(L, 3)) return replace_subgraph_call(L, s);
  if (!lx_is_module(L, 2))
    throw Error(fmt::format("replace: the replacement for {} must be a module, got {} (build one with slapo.nn "
                            "or slapo.nn.Module{{...}})", s->where(), lx_type_name(L, 2)));
  if (!lua_isnoneornil(L, 4))
    throw Error(fmt::format("replace: options ({{check =, name =}}) go with a subgraph, sub:replace(m, subgraph, "
                            "{{...}}); replacing {} whole takes none", s->where()));
  replace(*s, lx_check_module(L, 2), call_site(L, *s, 2, 2));
  lua_settop(L, 1);
  return 1;
}

int w_Schedule_shard(lua_State* L) {
  auto s = lx_check_live_schedule(L, 1, "shard");
  check_no_more_args(L, 4, *s, "shard", "sub:shard(param, axis [, {groups = n}])");
  if (lua_type(L, 2) == LUA_TNUMBER && lua_type(L, 3) == LUA_TSTRING)  // the commonest slip: arguments swapped
    throw Error(fmt::format("shard on {}: the parameter name comes first, then the axis: sub:shard(\"{}\", {})",
                            s->where(), lua_tostring(L, 3), lua_tostring(L, 2)));
  const std::string caller = on("shard", *s);  // option errors name the module
  std::string param = param_name_arg(L, 2, *s, "shard");
  if (lua_type(L, 3) != LUA_TNUMBER)
    throw Error(fmt::format("shard: the axis for '{}' of {} must be a number, got {}", param, s->where(),
                            luaL_typename(L, 3)));
  int64_t axis = lx_check_integer_value(lua_tonumber(L, 3), "axis", -64, 63, caller.c_str());
  lx_check_option_keys(L, 4, {"groups"}, caller.c_str());
  int groups = static_cast<int>(lx_check_integer_value(lx_opt_number(L, 4, "groups", 1, caller.c_str()), "groups", 1,
                                                       1 << 20, caller.c_str()));
  shard(*s, param, axis, call_site(L, *s, 2, 4), groups);
  lua_settop(L, 1);
  return 1;
}

// sub:sync(mode, op, {axis = N}) where op is a name, a reshard scheme or a function(value) -> value
int w_Schedule_sync(lua_State* L) {
  auto s = lx_check_live_schedule(L, 1, "sync");
  check_no_more_args(L, 4, *s, "sync", "sub:sync(mode, op [, {axis =, grad =, params =}])");
  const std::string caller = on("sync", *s);  // option errors name the module
  if (lua_type(L, 2) != LUA_TSTRING && lua_type(L, 2) != LUA_TNUMBER)
    throw Error(fmt::format("{}: the mode must be a string (fwd_pre, fwd_post, bwd_post or bwd_params), got {}", caller,
                            lua_isnoneornil(L, 2) ? "nothing" : luaL_typename(L, 2)));
  SyncMode mode = parse_sync_mode(lua_tostring(L, 2), *s);
  lx_check_option_keys(L, 4, {"axis", "grad", "params"}, caller.c_str());
  if (lua_istable(L, 4)) {  // its choices in the message, whatever the wrong value's type
    lua_getfield(L, 4, "grad");
    bool bad = !lua_isnil(L, -1) && lua_type(L, -1) != LUA_TSTRING;
    std::string got = luaL_typename(L, -1);
    lua_pop(L, 1);
    if (bad)
      throw Error(fmt::format("sync: grad for {} must be \"slice\" or \"reduce_scatter\", got a {}", s->where(), got));
  }
  std::string grad = lx_opt_string(L, 4, "grad", "slice", caller.c_str());
  if (grad != "slice" && grad != "reduce_scatter")
    throw Error(fmt::format("sync: grad for {} must be \"slice\" or \"reduce_scatter\", got \"{}\"", s->where(), grad));
  std::vector<std::string> params;  // bwd_params: only these
  if (lua_istable(L, 4)) {
    lua_getfield(L, 4, "params");
    if (!lua_isnil(L, -1)) {
      params = lx_check_strings(L, lua_gettop(L), caller.c_str(), "params");
    }
    lua_pop(L, 1);
  }
  double axis = lx_opt_number(L, 4, "axis", static_cast<double>(INT64_MIN), caller.c_str());
  if (axis != static_cast<double>(INT64_MIN)) axis = static_cast<double>(lx_check_integer_value(axis, "axis", -64, 63, caller.c_str()));
  SyncOp op;
  op.kind = SyncOp::Function;
  if (lua_isfunction(L, 3)) {
    auto fn = LuaRef::from_stack(L, 3);
    std::string what = fmt::format("sync function on {}", s->where());
    op.fn = [fn, what](const Value& v) { return call_lua_function(*fn, v, what); };
  } else if (lua_type(L, 3) == LUA_TSTRING) {
    if (axis != static_cast<double>(INT64_MIN) && std::string(lua_tostring(L, 3)) == "all_reduce")
      throw Error(fmt::format("{}: all_reduce sums whole tensors and takes no axis (axis goes with all_gather, "
                              "reduce_scatter and scatter)", caller));
    op = parse_sync_op(lua_tostring(L, 3), static_cast<int64_t>(axis), *s);
  } else {
    throw Error(fmt::format("sync: op for {} must be one of {}; got {}", s->where(), kSyncOps,
                            lua_isnoneornil(L, 3) ? "nothing" : luaL_typename(L, 3)));
  }
  op.reduce_scatter_grad = grad == "reduce_scatter";
  op.params = std::move(params);
  sync(*s, mode, op, call_site(L, *s, 2, 4));
  lua_settop(L, 1);
  return 1;
}

int w_Schedule_checkpoint(lua_State* L) {
  auto s = lx_check_live_schedule(L, 1, "checkpoint");
  check_no_more_args(L, 2, *s, "checkpoint", "sub:checkpoint() or sub:checkpoint(subgraph)");
  const std::string caller = on("checkpoint", *s);  // option errors name the module
  if (!lua_isnoneornil(L, 2)) {  // sub:checkpoint(subgraph) -> the wrapper's schedule
    auto names = subgraph_arg(L, 2, caller.c_str());
    std::string child = checkpoint_subgraph(*s, names, call_site(L, *s, 2, 2));
    lx_push_schedule(L, s->at(child));
    return 1;
  }
  checkpoint(*s, call_site(L, *s, 2, 1));
  lua_settop(L, 1);
  return 1;
}

// sub:fully_shard{reshard_after_forward = true, prefetch = true, overlap_reduce = true, group = dp_group}: fully sharded data
// parallelism over `group` (default: the schedule's group)
int w_Schedule_fully_shard(lua_State* L) {
  auto s = lx_check_live_schedule(L, 1, "fully_shard");
  check_no_more_args(L, 2, *s, "fully_shard",
                     "sub:fully_shard{reshard_after_forward = true, prefetch = true, overlap_reduce = true, group = dp_group}");
  const std::string caller = on("fully_shard", *s);  // option errors name the module
  if (!lua_isnoneornil(L, 2) && !lua_istable(L, 2))
    throw Error(fmt::format("{}: options must be a table like {{reshard_after_forward = false}}, got {}", caller,
                            luaL_typename(L, 2)));
  lx_check_option_keys(L, 2, {"reshard_after_forward", "prefetch", "overlap_reduce", "group"}, caller.c_str());
  FullyShardOptions options;
  options.reshard_after_forward = lx_opt_bool(L, 2, "reshard_after_forward", true, caller.c_str());
  options.prefetch = lx_opt_bool(L, 2, "prefetch", true, caller.c_str());
  options.overlap_reduce = lx_opt_bool(L, 2, "overlap_reduce", true, caller.c_str());
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "group");
    if (!lua_isnil(L, -1)) options.group = lx_group_arg(L, lua_gettop(L), caller + ": option 'group'");
    lua_pop(L, 1);
  }
  fully_shard(*s, options, call_site(L, *s, 2, 2));  // the options replay as written
  lua_settop(L, 1);
  return 1;
}

// sub:shard_experts{group = ep_group}: expert parallelism over `group` (default: the schedule's group)
int w_Schedule_shard_experts(lua_State* L) {
  auto s = lx_check_live_schedule(L, 1, "shard_experts");
  check_no_more_args(L, 2, *s, "shard_experts", "sub:shard_experts{group = ep_group}");
  const std::string caller = on("shard_experts", *s);
  if (!lua_isnoneornil(L, 2) && !lua_istable(L, 2))
    throw Error(fmt::format("{}: options must be a table like {{group = g}}, got {}", caller, luaL_typename(L, 2)));
  lx_check_option_keys(L, 2, {"group"}, caller.c_str());
  std::shared_ptr<dist::Group> group;
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "group");
    if (!lua_isnil(L, -1)) group = lx_group_arg(L, lua_gettop(L), caller + ": option 'group'");
    lua_pop(L, 1);
  }
  shard_experts(*s, group, call_site(L, *s, 2, 2));
  lua_settop(L, 1);
  return 1;
}

// sch:context_parallel{group = cp_group, method = "ring", load_balance = true}: the sequence split
// over `group` (default: every rank)
int w_Schedule_context_parallel(lua_State* L) {
  auto s = lx_check_live_schedule(L, 1, "context_parallel");
  check_no_more_args(L, 2, *s, "context_parallel", "sch:context_parallel{group = cp_group}");
  const std::string caller = on("context_parallel", *s);
  if (!lua_isnoneornil(L, 2) && !lua_istable(L, 2))
    throw Error(fmt::format("{}: options must be a table like {{group = g}}, got {}", caller, luaL_typename(L, 2)));
  lx_check_option_keys(L, 2, {"group", "method", "load_balance", "score_mib"}, caller.c_str());
  ContextParallelOptions options;
  options.method = lx_opt_string(L, 2, "method", "ring", caller.c_str());
  options.load_balance = lx_opt_bool(L, 2, "load_balance", true, caller.c_str());
  options.score_mib = lx_opt_number_in(L, 2, "score_mib", 32, 1e-6, 1e9, caller.c_str());
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "group");
    if (!lua_isnil(L, -1)) options.group = lx_group_arg(L, lua_gettop(L), caller + ": option 'group'");
    lua_pop(L, 1);
  }
  context_parallel(*s, options, call_site(L, *s, 2, 2));
  lua_settop(L, 1);
  return 1;
}

// sub:fork_rng([seed])
int w_Schedule_fork_rng(lua_State* L) {
  auto s = lx_check_live_schedule(L, 1, "fork_rng");
  check_no_more_args(L, 2, *s, "fork_rng", "sub:fork_rng([seed])");
  const std::string caller = on("fork_rng", *s);  // option errors name the module
  if (!lua_isnoneornil(L, 2) && lua_type(L, 2) != LUA_TNUMBER)
    throw Error(fmt::format("fork_rng: the seed for {} must be an integer, got {}", s->where(), luaL_typename(L, 2)));
  int64_t seed = lua_isnoneornil(L, 2) ? -1 : lx_check_integer_value(lua_tonumber(L, 2), "seed", 0, 9.0e15, caller.c_str());
  fork_rng(*s, seed, call_site(L, *s, 2, 2));
  lua_settop(L, 1);
  return 1;
}

// sub:trace{inputs = {x, ...}, leaves = {"path" or "Type", ...}, flatten = false, recursive = false,
// fallback = false} -> sub (and, with fallback, the paths of the children kept as calls); without inputs,
// example inputs shaped like the module's last call
int w_Schedule_trace(lua_State* L) {
  auto s = lx_check_live_schedule(L, 1, "trace");
  const std::string caller = on("trace", *s);  // option errors name the module
  if (lua_isnoneornil(L, 2)) {  // sub:trace(): every option at its default
    lua_settop(L, 1);
    lua_newtable(L);
  }
  lx_check_option_keys(L, 2, {"inputs", "leaves", "flatten", "recursive", "fallback"}, caller.c_str());
  Values inputs;
  std::vector<std::string> leaves;
  lua_getfield(L, 2, "inputs");
  if (!lua_isnil(L, -1) && !lua_istable(L, -1))
    throw Error(fmt::format("trace: inputs for {} must be an array of tensors {{x, ...}}, got {}", s->where(),
                            luaL_typename(L, -1)));
  if (lua_istable(L, -1))
    for (size_t i = 1; i <= lua_objlen(L, -1); ++i) {
      lua_rawgeti(L, -1, static_cast<int>(i));
      inputs.push_back(lx_to_value(L, -1));
      lua_pop(L, 1);
    }
  lua_pop(L, 1);
  lua_getfield(L, 2, "leaves");
  if (!lua_isnil(L, -1) && !lua_istable(L, -1))
    throw Error(fmt::format("trace: leaves for {} must be an array of module paths or type names, got {}", s->where(),
                            luaL_typename(L, -1)));
  if (lua_istable(L, -1))
    for (size_t i = 1; i <= lua_objlen(L, -1); ++i) {
      lua_rawgeti(L, -1, static_cast<int>(i));
      if (lua_type(L, -1) != LUA_TSTRING)
        throw Error(fmt::format("trace: leaves[{}] must be a module path or type name (a string), got {}", i,
                                luaL_typename(L, -1)));
      leaves.emplace_back(lua_tostring(L, -1));
      lua_pop(L, 1);
    }
  lua_pop(L, 1);
  bool flatten = lx_opt_bool(L, 2, "flatten", false, caller.c_str());
  bool recursive = lx_opt_bool(L, 2, "recursive", false, caller.c_str());
  bool fallback = lx_opt_bool(L, 2, "fallback", false, caller.c_str());
  // The options hold tensors, so the log refers to them as args[N] (sch:log_args()).
  CallSite site = call_site(L, *s, 2, 2);
  auto kept = trace(*s, inputs, leaves, flatten, site, recursive, fallback);
  lua_settop(L, 1);
  if (!fallback) return 1;
  lua_createtable(L, static_cast<int>(kept.size()), 0);  // and the children kept as calls
  for (size_t i = 0; i < kept.size(); ++i) {
    lua_pushstring(L, kept[i].c_str());
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 2;
}

void push_graph_nodes(lua_State* L, const std::vector<GraphNode>& nodes) {
  lua_createtable(L, static_cast<int>(nodes.size()), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    lua_newtable(L);
    lua_pushstring(L, nodes[i].op.c_str());
    lua_setfield(L, -2, "op");
    lua_pushstring(L, nodes[i].name.c_str());
    lua_setfield(L, -2, "name");
    if (!nodes[i].target.empty()) {
      lua_pushstring(L, nodes[i].target.c_str());
      lua_setfield(L, -2, "target");
    }
    lx_push_strings(L, nodes[i].inputs);
    lua_setfield(L, -2, "inputs");
    lx_push_strings(L, nodes[i].users);
    lua_setfield(L, -2, "users");
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
}

// sub:graph() -> {nodes = {...}} printing as the graph's text
int w_Schedule_graph(lua_State* L) {
  auto s = lx_check_schedule(L, 1);
  auto& graph = s->mod()->meta().graph;
  if (!graph) throw Error(fmt::format("graph: {} is not traced; call trace{{inputs = ...}} on it first", s->where()));
  lua_newtable(L);
  push_graph_nodes(L, graph->nodes());
  lua_setfield(L, -2, "nodes");
  lua_pushstring(L, graph->str().c_str());
  lua_setfield(L, -2, "text");
  luaL_getmetatable(L, "slapo.Graph");
  lua_setmetatable(L, -2);
  return 1;
}

// sub:find(regex) -> array of subgraphs, each an array of nodes
int w_Schedule_find(lua_State* L) {
  auto s = lx_check_live_schedule(L, 1, "find");
  const std::string caller = on("find", *s);  // option errors name the module
  if (lua_isfunction(L, 2)) {  // a pattern: traced with one tensor per parameter
    auto fn = LuaRef::from_stack(L, 2);
    // debug.getinfo(fn, "u").nparams: one example tensor per parameter
    lua_getglobal(L, "debug");
    lua_getfield(L, -1, "getinfo");
    lua_pushvalue(L, 2);
    lua_pushstring(L, "u");
    lx_pcall(L, 2, 1);
    lua_getfield(L, -1, "nparams");
    int nparams = static_cast<int>(lua_tonumber(L, -1));
    lua_pop(L, 3);
    // {inputs = {t1, t2, ...}}: example tensors the pattern is traced on (its ops may need shapes)
    // {modules = true}: F.relu in the pattern also matches an nn.ReLU leaf (Slapo's default)
    lx_check_option_keys(L, 3, {"inputs", "modules"}, caller.c_str());
    bool modules = lx_opt_bool(L, 3, "modules", false, caller.c_str());
    Values examples;
    if (lua_istable(L, 3)) {
      lua_getfield(L, 3, "inputs");
      if (!lua_isnil(L, -1)) {
        if (!lua_istable(L, -1)) throw Error("find: inputs must be an array of example tensors");
        for (size_t i = 1; i <= lua_objlen(L, -1); ++i) {
          lua_rawgeti(L, -1, static_cast<int>(i));
          examples.emplace_back(lx_check_tensor(L, -1));
          lua_pop(L, 1);
        }
      }
      lua_pop(L, 1);
    }
    auto matches = find_pattern(*s, [fn](Values args) {
      lua_State* T = fn->push("find pattern");
      int top = lua_gettop(T) - 1;
      for (auto& a : args) lx_push_value(T, a);
      lx_pcall(T, static_cast<int>(args.size()), 1);
      Value out = lx_to_value(T, -1);
      lua_settop(T, top);
      return out;
    }, nparams, examples, modules);
    lua_createtable(L, static_cast<int>(matches.size()), 0);
    for (size_t i = 0; i < matches.size(); ++i) {
      push_graph_nodes(L, matches[i]);
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    return 1;
  }
  if (lua_type(L, 2) != LUA_TSTRING)
    throw Error(fmt::format("{}: expected a regular expression over leaf paths (a string) or a pattern function, "
                            "got {}", caller, luaL_typename(L, 2)));
  if (!lua_isnoneornil(L, 3))  // options belong to patterns: a path regex takes none
    throw Error(fmt::format("{}: a path regular expression takes no options ({{inputs =, modules =}} go with a "
                            "pattern function), got a {}", caller, luaL_typename(L, 3)));
  auto nodes = find_nodes(*s, lua_tostring(L, 2));
  lua_createtable(L, static_cast<int>(nodes.size()), 0);
  for (size_t i = 0; i < nodes.size(); ++i) {
    push_graph_nodes(L, {nodes[i]});
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}

int w_Schedule_decompose(lua_State* L) {
  auto s = lx_check_live_schedule(L, 1, "decompose");
  check_no_more_args(L, 1, *s, "decompose", "sub:decompose()");
  decompose(*s, call_site(L, *s, 2, 1));
  lua_settop(L, 1);
  return 1;
}

// sub:fuse(nil, {compiler = "kernels"}) -> number of fused subgraphs;
// sub:fuse(subgraph, {compiler = "kernels", name = "BiasGeLU"}) -> the fused child's schedule
int w_Schedule_fuse(lua_State* L) {
  auto s = lx_check_live_schedule(L, 1, "fuse");
  const std::string caller = on("fuse", *s);  // option errors name the module
  if (!lua_isnoneornil(L, 2)) lx_check_option_keys(L, 3, {"compiler", "name"}, caller.c_str());
  else lx_check_option_keys(L, 3, {"compiler"}, caller.c_str());
  if (!lua_isnoneornil(L, 2)) {
    auto names = subgraph_arg(L, 2, on("fuse", *s).c_str());
    std::string compiler = lx_opt_string(L, 3, "compiler", "kernels", "fuse");
    std::string name = lx_opt_string(L, 3, "name", "FusedKernel", "fuse");
    std::string child = fuse_subgraph(*s, names, compiler, name, call_site(L, *s, 2, 3));
    lx_push_schedule(L, s->at(child));
    return 1;
  }
  std::string compiler = lx_opt_string(L, 3, "compiler", "kernels", "fuse");
  lua_pushnumber(L, fuse(*s, compiler, call_site(L, *s, 2, 3)));
  return 1;
}

// slapo.pattern.call_module(regex, x, ...): inside a find pattern, a call of any leaf whose path
// matches regex
int w_pattern_call_module(lua_State* L) {
  std::string regex = luaL_checkstring(L, 1);
  std::vector<at::Tensor> inputs;
  for (int i = 2; i <= lua_gettop(L); ++i) inputs.push_back(lx_check_tensor(L, i));
  lx_push_tensor(L, call_module_pattern(regex, inputs));
  return 1;
}

// slapo.pattern.module(type_regex, x, ...): inside a find pattern, a call of any leaf whose module
// type matches type_regex ("^Linear$", "ReLU|GELU")
int w_pattern_module(lua_State* L) {
  std::string regex = luaL_checkstring(L, 1);
  std::vector<at::Tensor> inputs;
  for (int i = 2; i <= lua_gettop(L); ++i) inputs.push_back(lx_check_tensor(L, i));
  lx_push_tensor(L, call_module_pattern("type:" + regex, inputs));
  return 1;
}

int w_Graph_tostring(lua_State* L) {
  lua_getfield(L, 1, "text");
  return 1;
}

int w_Schedule_cut_pipeline_stage(lua_State* L) {
  auto s = lx_check_live_schedule(L, 1, "cut_pipeline_stage");
  check_no_more_args(L, 1, *s, "cut_pipeline_stage", "sub:cut_pipeline_stage()");
  cut_pipeline_stage(*s, call_site(L, *s, 2, 1));
  lua_settop(L, 1);
  return 1;
}

int w_Schedule_annotate(lua_State* L) {
  auto s = lx_check_live_schedule(L, 1, "annotate");
  check_no_more_args(L, 4, *s, "annotate", "sub:annotate(param, key, value)");
  std::string param = param_name_arg(L, 2, *s, "annotate");
  // a number key would be stored as its digits, unlike what was written (a missing parameter is said first)
  if (lua_type(L, 3) != LUA_TSTRING && (lua_type(L, 3) != LUA_TNUMBER || s->mod()->has_param(param)))
    throw Error(fmt::format("{}: the key must be a string, got {}", on("annotate", *s),
                            lua_isnoneornil(L, 3) ? "nothing"
                            : lua_type(L, 3) == LUA_TNUMBER ? fmt::format("the number {}", lua_tostring(L, 3))
                                                            : lx_type_name(L, 3)));
  // nothing would be stored, yet the log would say something was (a missing parameter is said first)
  if (lua_isnoneornil(L, 4) && s->mod()->has_param(param))
    throw Error(fmt::format("{}: the value must be a number, string, boolean or a table of those, got nothing (the "
                            "form is sub:annotate(param, key, value))",
                            on("annotate", *s)));
  if (lx_is_tensor(L, 4))
    throw Error(fmt::format("{}: the value must be a number, string, boolean or a table of those, got a tensor (the "
                            "schedule log replays annotations as Lua literals)",
                            on("annotate", *s)));
  Value value;
  try {
    value = lx_to_value(L, 4);
  } catch (const Error& e) {  // the conversion's own words, with the primitive and module in front
    throw Error(fmt::format("{}: {}", on("annotate", *s), e.what()));
  }
  annotate(*s, param, lua_tostring(L, 3), value, call_site(L, *s, 2, 4));
  lua_settop(L, 1);
  return 1;
}

// sch:param_info(name) -> {shape=, full_shape=, shard_axis=, annotations={...}}
int w_Schedule_param_info(lua_State* L) {
  auto s = lx_check_schedule(L, 1);
  check_no_more_args(L, 2, *s, "param_info", "sub:param_info(param)");
  std::string name = param_name_arg(L, 2, *s, "param_info");
  auto& m = *s->mod();
  if (!m.has_param(name)) {
    std::vector<std::string> names;
    for (auto& p : m.named_parameters(/*recurse=*/false)) names.push_back(p.key());
    auto close = closest_names(name, names);
    throw Error(fmt::format("param_info: {} ({}) has no parameter '{}'{}; its parameters are: {}", s->where(),
                            m.type_name(), name, close.empty() ? "" : fmt::format(" (did you mean '{}'?)", close[0]),
                            join_or_none(names)));
  }
  at::Tensor t = m.param(name);
  auto push_shape = [L](const std::vector<int64_t>& shape) {
    lua_createtable(L, static_cast<int>(shape.size()), 0);
    for (size_t i = 0; i < shape.size(); ++i) {
      lua_pushnumber(L, static_cast<double>(shape[i]));
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
  };
  lua_newtable(L);
  push_shape(t.sizes().vec());
  lua_setfield(L, -2, "shape");
  auto spec = shard_spec_of(*s, name);  // a tied parameter reports its tie's split
  push_shape(spec ? spec->full_shape : t.sizes().vec());
  lua_setfield(L, -2, "full_shape");
  if (spec) {
    lua_pushnumber(L, static_cast<double>(spec->axis));
    lua_setfield(L, -2, "shard_axis");
  }
  lua_newtable(L);
  auto notes = m.meta().annotations.find(name);
  if (notes != m.meta().annotations.end())
    for (auto& [key, value] : notes->second) {
      lx_push_value(L, value);
      lua_setfield(L, -2, key.c_str());
    }
  lua_setfield(L, -2, "annotations");
  return 1;
}

// The shard spec of parameter `path` ("a.b.weight", relative to this node), or nullptr.
const ShardSpec* spec_of(Schedule& s, const std::string& path) {
  auto dot = path.rfind('.');
  auto owner = s.at(dot == std::string::npos ? "" : path.substr(0, dot));
  std::string leaf = dot == std::string::npos ? path : path.substr(dot + 1);
  auto found = owner->mod()->meta().shards.find(leaf);
  return found == owner->mod()->meta().shards.end() ? nullptr : &found->second;
}

// sch:full_param(path, local) -> the full tensor (gathered over the group when sharded). Every
// rank of the group calls it for the same path.
int w_Schedule_full_param(lua_State* L) {
  auto s = lx_check_schedule(L, 1);
  auto& local = lx_check_tensor(L, 3);
  const ShardSpec* spec = spec_of(*s, luaL_checkstring(L, 2));
  if (!spec) {
    lx_push_tensor(L, local.detach());
    return 1;
  }
  lx_push_tensor(L, spec->regroup(s->group()->all_gather(spec->padded(local.detach()), spec->axis, "full_param")));
  return 1;
}

// sch:local_param(path, full) -> this rank's part of a full tensor for that parameter
int w_Schedule_local_param(lua_State* L) {
  auto s = lx_check_schedule(L, 1);
  auto& full = lx_check_tensor(L, 3);
  const ShardSpec* spec = spec_of(*s, luaL_checkstring(L, 2));
  lx_push_tensor(L, spec ? spec->local(full).contiguous() : full);
  return 1;
}

int w_Schedule_log(lua_State* L) {
  lua_pushstring(L, lx_check_schedule(L, 1)->log().to_lua().c_str());
  return 1;
}

// sch:log_entries() -> {{primitive =, path =, args = {Lua source, ...}, source = "file:line"}, ...}: the log as
// data, for readers of what a schedule did (the planner's pins, stdlib/slapo/plan_pins.lua)
int w_Schedule_log_entries(lua_State* L) {
  const auto& entries = lx_check_schedule(L, 1)->log().entries();
  lua_createtable(L, static_cast<int>(entries.size()), 0);
  for (size_t i = 0; i < entries.size(); ++i) {
    const LogEntry& e = entries[i];
    lua_createtable(L, 0, 4);
    lua_pushstring(L, e.primitive.c_str());
    lua_setfield(L, -2, "primitive");
    lua_pushstring(L, e.path.c_str());
    lua_setfield(L, -2, "path");
    lx_push_strings(L, e.lua_args);
    lua_setfield(L, -2, "args");
    lua_pushstring(L, e.source.c_str());
    lua_setfield(L, -2, "source");
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}

int w_Schedule_named_schedules(lua_State* L) {
  auto all = lx_check_schedule(L, 1)->named_schedules();
  lua_createtable(L, static_cast<int>(2 * all.size()), 0);
  for (size_t i = 0; i < all.size(); ++i) {
    lua_pushstring(L, all[i].first.c_str());
    lua_rawseti(L, -2, static_cast<int>(2 * i + 1));
    lx_push_schedule(L, all[i].second);
    lua_rawseti(L, -2, static_cast<int>(2 * i + 2));
  }
  return lx_push_pairs_iterator(L);
}

int w_Schedule_children(lua_State* L) {
  auto& children = lx_check_schedule(L, 1)->children();
  lua_createtable(L, static_cast<int>(children.size()), 0);
  for (size_t i = 0; i < children.size(); ++i) {
    lx_push_schedule(L, children[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}

// sch.path, sch.name, sch.mod, sch.parent, sch.rank, sch.world_size, else sch["a.b.c"].
int schedule_fields(lua_State* L) {
  auto& s = lx_check_schedule(L, 1);
  if (lua_type(L, 2) != LUA_TSTRING)
    return luaL_error(L, "schedule: index with a module path string like sch[\"encoder.layer.0\"], got %s",
                      luaL_typename(L, 2));
  const char* key = lua_tostring(L, 2);
  if (!std::strcmp(key, "path")) lua_pushstring(L, s->path().c_str());
  else if (!std::strcmp(key, "name")) lua_pushstring(L, s->name().c_str());
  else if (!std::strcmp(key, "mod")) lx_push_module(L, s->mod());
  else if (!std::strcmp(key, "parent")) {
    if (auto p = s->parent()) lx_push_schedule(L, p);
    else lua_pushnil(L);
  } else if (!std::strcmp(key, "rank")) lua_pushnumber(L, s->group()->rank());
  else if (!std::strcmp(key, "world_size")) lua_pushnumber(L, s->group()->size());
  else lx_push_schedule(L, s->at(key));
  return 1;
}

// create_schedule(model, {group = g})
int w_create_schedule(lua_State* L) {
  if (int given = lx_last_given_arg(L); given > 2)
    throw Error(fmt::format("create_schedule: takes a module and an options table ({{group = g}}), got {} arguments", given));
  lx_check_option_keys(L, 2, {"group"}, "create_schedule");
  std::shared_ptr<dist::Group> group = dist::world();
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "group");
    if (!lua_isnil(L, -1)) group = lx_group_arg(L, lua_gettop(L), "create_schedule: option 'group'");
    lua_pop(L, 1);
  }
  if (!group->contains_me())
    throw Error(fmt::format("create_schedule: this rank is not in {}, the group the schedule would use",
                            group->describe()));
  auto sch = Schedule::create(lx_check_module(L, 1), group);
  // log_args are keyed by the log's address: a new log may reuse a freed one's
  lua_getfield(L, LUA_REGISTRYINDEX, "slapo.log_args");
  lua_pushlightuserdata(L, &sch->log());
  lua_pushnil(L);
  lua_rawset(L, -3);
  lua_pop(L, 1);
  lx_push_schedule(L, sch);
  return 1;
}

const luaL_Reg schedule_methods[] = {{"log", w_Schedule_log},
                                     {"log_args", w_Schedule_log_args},
                                     {"log_entries", w_Schedule_log_entries},
                                     {"replace", w_Schedule_replace},
                                     {"shard", w_Schedule_shard},
                                     {"sync", w_Schedule_sync},
                                     {"annotate", w_Schedule_annotate},
                                     {"checkpoint", w_Schedule_checkpoint},
                                     {"fork_rng", w_Schedule_fork_rng},
                                     {"fully_shard", w_Schedule_fully_shard}, {"shard_experts", w_Schedule_shard_experts},
                                     {"context_parallel", w_Schedule_context_parallel},
                                     {"param_info", w_Schedule_param_info},
                                     {"full_param", w_Schedule_full_param},
                                     {"trace", w_Schedule_trace},
                                     {"graph", w_Schedule_graph},
                                     {"find", w_Schedule_find},
                                     {"decompose", w_Schedule_decompose},
                                     {"fuse", w_Schedule_fuse},
                                     {"cut_pipeline_stage", w_Schedule_cut_pipeline_stage},
                                     {"local_param", w_Schedule_local_param},
                                     {"named_schedules", w_Schedule_named_schedules},
                                     {"children", w_Schedule_children},
                                     {nullptr, nullptr}};

// _fully_shard_prefetches() -> {used =, stale =, backward =, not_gathered_again =} (internal:
// tests/dist/fully_shard_spec.lua)
int w_fully_shard_prefetches(lua_State* L) {
  auto counts = fully_shard_prefetch_counts();
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, static_cast<lua_Integer>(counts.not_gathered_again));
  lua_setfield(L, -2, "not_gathered_again");
  lua_pushinteger(L, static_cast<lua_Integer>(counts.backward));
  lua_setfield(L, -2, "backward");
  lua_pushinteger(L, static_cast<lua_Integer>(counts.used));
  lua_setfield(L, -2, "used");
  lua_pushinteger(L, static_cast<lua_Integer>(counts.stale));
  lua_setfield(L, -2, "stale");
  return 1;
}

// _fully_shard_reductions() -> {in_flight =, beside_backward =, at_end =, dropped =} (internal: tests)
int w_fully_shard_reductions(lua_State* L) {
  auto counts = gradient_reduction_counts();
  lua_createtable(L, 0, 4);
  lua_pushinteger(L, static_cast<lua_Integer>(counts.dropped));
  lua_setfield(L, -2, "dropped");
  lua_pushinteger(L, static_cast<lua_Integer>(counts.in_flight));
  lua_setfield(L, -2, "in_flight");
  lua_pushinteger(L, static_cast<lua_Integer>(counts.beside_backward));
  lua_setfield(L, -2, "beside_backward");
  lua_pushinteger(L, static_cast<lua_Integer>(counts.at_end));
  lua_setfield(L, -2, "at_end");
  return 1;
}

const luaL_Reg schedule_meta[] = {
    {"__gc", w_Schedule_gc}, {"__tostring", w_Schedule_tostring}, {"__eq", w_Schedule_eq}, {nullptr, nullptr}};

}  // namespace

void open_schedule(lua_State* L) {
  luaL_newmetatable(L, "slapo.Graph");
  lx_set_func(L, "__tostring", w_Graph_tostring);
  lua_pop(L, 1);
  lua_newtable(L);
  lua_setfield(L, LUA_REGISTRYINDEX, "slapo.log_args");
  lx_new_class(L, "slapo.Schedule", schedule_methods, schedule_meta, schedule_fields);
  lx_set_func(L, "create_schedule", w_create_schedule);
  lx_set_func(L, "_fully_shard_prefetches", w_fully_shard_prefetches);
  lx_set_func(L, "_fully_shard_reductions", w_fully_shard_reductions);
  lua_newtable(L);
  lx_set_func(L, "call_module", w_pattern_call_module);
  lx_set_func(L, "module", w_pattern_module);
  lua_setfield(L, -2, "pattern");
}

}  // namespace slapo
