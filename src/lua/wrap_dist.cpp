// slapo.dist: rank, world_size, collectives and sub-groups. Each takes an optional group last.
#include "core/error.h"
#include "distributed/autograd_collectives.h"
#include "distributed/world.h"
#include "lua/runtime.h"
#include "lua/wrap.h"

namespace slapo {

using GroupPtr = std::shared_ptr<dist::Group>;

void lx_push_group(lua_State* L, GroupPtr g) {
  if (!g) {
    lua_pushnil(L);
    return;
  }
  void* p = lua_newuserdata(L, sizeof(GroupPtr));
  new (p) GroupPtr(std::move(g));
  luaL_getmetatable(L, "slapo.Group");
  lua_setmetatable(L, -2);
}

namespace {

// The group at `idx`, or the world when it is absent; `what` names the argument in the error
// ("dist.all_reduce: argument 2 (the group)", "create_schedule: option 'group'").
GroupPtr group_at(lua_State* L, int idx, const std::string& what) {
  if (lua_isnoneornil(L, idx)) return dist::world();
  void* p = luaL_testudata(L, idx, "slapo.Group");
  if (!p)
    throw Error(fmt::format("{} must be a group (slapo.dist.new_group, slapo.dist.world() or a layout's tp_group, "
                            "dp_group, pp_group), got {}",
                            what, lua_type(L, idx) == LUA_TSTRING ? fmt::format("the string '{}'", lua_tostring(L, idx))
                                                                  : luaL_typename(L, idx)));
  return *static_cast<GroupPtr*>(p);
}
// A slapo.dist function's group argument: its form in the error
GroupPtr group_arg(lua_State* L, int idx, const char* fn, const char* form) {
  return group_at(L, idx, fmt::format("dist.{}: argument {} (the form is {})", fn, idx, form));
}

int w_Group_gc(lua_State* L) {
  static_cast<GroupPtr*>(luaL_checkudata(L, 1, "slapo.Group"))->~GroupPtr();
  return 0;
}
int w_Group_tostring(lua_State* L) {
  lua_pushstring(L, group_at(L, 1, "group").get()->describe().c_str());
  return 1;
}
int w_Group_ranks(lua_State* L) {
  auto g = group_at(L, 1, "group:ranks: the group");
  lua_createtable(L, g->size(), 0);
  for (int i = 0; i < g->size(); ++i) {
    lua_pushnumber(L, g->ranks()[i]);
    lua_rawseti(L, -2, i + 1);
  }
  return 1;
}

int w_rank(lua_State* L) {
  lua_pushnumber(L, group_arg(L, 1, "rank", "dist.rank([group])")->rank());
  return 1;
}
int w_world_size(lua_State* L) {
  lua_pushnumber(L, group_arg(L, 1, "world_size", "dist.world_size([group])")->size());
  return 1;
}
// all_to_all_totals() -> {calls =, bytes =, seconds =}: this process's all-to-all exchanges so far
// (shard_experts' dispatch); a benchmark takes the difference over its steps.
int w_all_to_all_totals(lua_State* L) {
  auto totals = dist::all_to_all_totals();
  lua_createtable(L, 0, 3);
  lua_pushnumber(L, static_cast<lua_Number>(totals.calls));
  lua_setfield(L, -2, "calls");
  lua_pushnumber(L, static_cast<lua_Number>(totals.bytes));
  lua_setfield(L, -2, "bytes");
  lua_pushnumber(L, totals.seconds);
  lua_setfield(L, -2, "seconds");
  return 1;
}

// Each collective first checks that every rank makes the same call (Group::check_same_call).
int w_barrier(lua_State* L) {
  auto g = group_arg(L, 1, "barrier", "dist.barrier([group])");
  g->check_same_call("barrier", at::Tensor());
  g->barrier();
  return 0;
}
int w_all_reduce(lua_State* L) {
  auto g = group_arg(L, 2, "all_reduce", "dist.all_reduce(tensor [, group]), a sum in place");
  auto& t = lx_check_tensor(L, 1);
  g->check_same_call("all_reduce", t);
  g->all_reduce(t);
  lua_settop(L, 1);
  return 1;
}
int w_all_gather(lua_State* L) {
  auto g = group_arg(L, 3, "all_gather", "dist.all_gather(tensor, dim [, group])");
  auto& t = lx_check_tensor(L, 1);
  auto dim = lx_check_integer_value(luaL_optnumber(L, 2, 0), "dim", -64, 63, "dist.all_gather");
  g->check_same_call("all_gather", t, dim);
  lx_push_tensor(L, g->all_gather(t, dim));
  return 1;
}
int w_reduce_scatter(lua_State* L) {
  auto g = group_arg(L, 3, "reduce_scatter", "dist.reduce_scatter(tensor, dim [, group])");
  auto& t = lx_check_tensor(L, 1);
  auto dim = lx_check_integer_value(luaL_optnumber(L, 2, 0), "dim", -64, 63, "dist.reduce_scatter");
  g->check_same_call("reduce_scatter", t, dim);
  lx_push_tensor(L, g->reduce_scatter(t, dim));
  return 1;
}
int w_broadcast(lua_State* L) {
  auto g = group_arg(L, 3, "broadcast", "dist.broadcast(tensor, src [, group])");
  auto& t = lx_check_tensor(L, 1);
  // a whole number here; Group::broadcast then says which ranks the group has
  auto src = static_cast<int>(lx_check_integer_value(luaL_optnumber(L, 2, 0), "src", -(1 << 30), 1 << 30, "dist.broadcast"));
  g->check_same_call("broadcast", t, src);
  g->broadcast(t, src);
  lua_settop(L, 1);
  return 1;
}
// Differentiable collectives (Megatron's f and g and their siblings): slapo.dist.autograd.*
int w_copy_to(lua_State* L) {
  lx_push_tensor(L, dist::copy_to_group(lx_check_tensor(L, 1), group_arg(L, 2, "autograd.copy_to", "dist.autograd.copy_to(tensor [, group])")));
  return 1;
}
int w_reduce_from(lua_State* L) {
  lx_push_tensor(L, dist::reduce_from_group(lx_check_tensor(L, 1), group_arg(L, 2, "autograd.reduce_from", "dist.autograd.reduce_from(tensor [, group])")));
  return 1;
}
// The dim a gather or scatter works along: one of the tensor's, said in the caller's name.
int64_t tensor_dim_arg(lua_State* L, int idx, const at::Tensor& t, const char* fn) {
  if (lua_type(L, idx) != LUA_TNUMBER)
    throw Error(fmt::format("{}: dim must be a number, got {}", fn, lx_type_name(L, idx)));
  int64_t n = std::max<int64_t>(t.dim(), 1);
  return lx_check_integer_value(lua_tonumber(L, idx), fmt::format("dim (of a {}-d tensor)", t.dim()).c_str(),
                                static_cast<double>(-n), static_cast<double>(n - 1), fn);
}
int w_gather_from(lua_State* L) {
  const char* fn = "autograd.gather_from";
  auto& x = lx_check_tensor(L, 1);
  lx_push_tensor(L, dist::gather_from_group(x, tensor_dim_arg(L, 2, x, fn),
                                            group_arg(L, 3, fn, "dist.autograd.gather_from(tensor, dim [, group])")));
  return 1;
}
int w_scatter_to(lua_State* L) {
  const char* fn = "autograd.scatter_to";
  auto& x = lx_check_tensor(L, 1);
  lx_push_tensor(L, dist::scatter_to_group(x, tensor_dim_arg(L, 2, x, fn),
                                           group_arg(L, 3, fn, "dist.autograd.scatter_to(tensor, dim [, group])")));
  return 1;
}
const luaL_Reg autograd_functions[] = {{"copy_to", w_copy_to},
                                       {"reduce_from", w_reduce_from},
                                       {"gather_from", w_gather_from},
                                       {"scatter_to", w_scatter_to},
                                       {nullptr, nullptr}};

int w_new_group(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  std::vector<int> ranks;
  for (size_t i = 1; i <= lua_objlen(L, 1); ++i) {
    lua_rawgeti(L, 1, static_cast<int>(i));
    ranks.push_back(static_cast<int>(luaL_checknumber(L, -1)));
    lua_pop(L, 1);
  }
  lx_push_group(L, dist::new_group(ranks));
  return 1;
}
int w_group(lua_State* L) {
  lx_push_group(L, dist::world());
  return 1;
}
// "cuda:<LOCAL_RANK>" under NCCL, else "cpu": where a rank puts the tensors its collectives take.
// The node layout, as torchrun's variables gave it (a world of one: rank 0 of one node).
int push_node_layout(lua_State* L, const char* fn, const char* usage, int dist::WorldOptions::*field) {
  lx_check_arg_count(L, 0, fn, usage);
  dist::world();
  lua_pushnumber(L, dist::options().*field);
  return 1;
}
int w_local_rank(lua_State* L) {
  return push_node_layout(L, "dist.local_rank", "dist.local_rank()", &dist::WorldOptions::local_rank);
}
int w_node_rank(lua_State* L) {
  return push_node_layout(L, "dist.node_rank", "dist.node_rank()", &dist::WorldOptions::node_rank);
}
int w_local_world_size(lua_State* L) {
  return push_node_layout(L, "dist.local_world_size", "dist.local_world_size()", &dist::WorldOptions::local_world_size);
}

int w_device(lua_State* L) {
  lua_pushstring(L, dist::device().c_str());
  return 1;
}

const luaL_Reg group_methods[] = {{"ranks", w_Group_ranks}, {"rank", w_rank}, {"size", w_world_size}, {nullptr, nullptr}};
const luaL_Reg group_meta[] = {{"__gc", w_Group_gc}, {"__tostring", w_Group_tostring}, {nullptr, nullptr}};

const luaL_Reg dist_functions[] = {
    {"rank", w_rank},           {"world_size", w_world_size}, {"barrier", w_barrier},
    {"all_to_all_totals", w_all_to_all_totals},
    {"all_reduce", w_all_reduce}, {"all_gather", w_all_gather}, {"reduce_scatter", w_reduce_scatter},
    {"broadcast", w_broadcast}, {"new_group", w_new_group},   {"world", w_group},
    {"device", w_device},       {"local_rank", w_local_rank}, {"node_rank", w_node_rank},
    {"local_world_size", w_local_world_size}, {nullptr, nullptr}};

}  // namespace

std::shared_ptr<dist::Group> lx_group_arg(lua_State* L, int idx, const std::string& what) { return group_at(L, idx, what); }

void open_dist(lua_State* L) {
  lx_new_class(L, "slapo.Group", group_methods, group_meta, nullptr);
  lua_newtable(L);
  lx_set_funcs(L, dist_functions);
  lua_newtable(L);
  lx_set_funcs(L, autograd_functions);
  lua_setfield(L, -2, "autograd");
  lua_setfield(L, -2, "dist");
}

}  // namespace slapo
