// slapo.dist.data_parallel: bucketed gradient all-reduce overlapped with backward.
#include "core/error.h"
#include "distributed/grad_buckets.h"
#include "distributed/world.h"
#include "lua/runtime.h"
#include "lua/wrap.h"

namespace slapo {

namespace {

using BucketsPtr = std::shared_ptr<dist::GradBuckets>;

dist::GradBuckets& check_buckets(lua_State* L, int idx) {
  return **static_cast<BucketsPtr*>(luaL_checkudata(L, idx, "slapo.DataParallel"));
}

int w_DataParallel_gc(lua_State* L) {
  static_cast<BucketsPtr*>(luaL_checkudata(L, 1, "slapo.DataParallel"))->~BucketsPtr();
  return 0;
}

// dp:finish(): wait for every bucket; gradients are then averaged over the group
int w_DataParallel_finish(lua_State* L) {
  check_buckets(L, 1).finish();
  return 0;
}

int w_DataParallel_set_backward_passes(lua_State* L) {
  check_buckets(L, 1).set_backward_passes(static_cast<int>(luaL_checknumber(L, 2)));
  lua_settop(L, 1);
  return 1;
}

// dp:buckets() -> {{"lm_head.weight", ...}, ...} in the order they are reduced
int w_DataParallel_buckets(lua_State* L) {
  auto names = check_buckets(L, 1).bucket_names();
  lua_createtable(L, static_cast<int>(names.size()), 0);
  for (size_t i = 0; i < names.size(); ++i) {
    lx_push_strings(L, names[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}

// dp:started_early() -> how many buckets began reducing during the last step's backward
int w_DataParallel_started_early(lua_State* L) {
  lua_pushnumber(L, check_buckets(L, 1).started_early());
  return 1;
}

// data_parallel(model or {tensors}, {group = dp_group, bucket_mb = 25, backward_passes = 1})
int w_data_parallel(lua_State* L) {
  std::vector<std::pair<std::string, at::Tensor>> params;
  if (lx_is_module(L, 1)) {
    for (auto& [name, p] : unique_named_parameters(*lx_check_module(L, 1)))
      if (p.requires_grad()) params.emplace_back(name, p);
  } else if (lua_istable(L, 1)) {
    for (size_t i = 1; i <= lua_objlen(L, 1); ++i) {
      lua_rawgeti(L, 1, static_cast<int>(i));
      params.emplace_back(std::to_string(i), lx_check_tensor(L, -1));
      lua_pop(L, 1);
    }
  } else {
    throw Error(fmt::format("dist.data_parallel: the first argument must be a module or an array of parameters, got {}",
                            lx_type_name(L, 1)));
  }
  std::shared_ptr<dist::Group> group = dist::world();
  lx_check_option_keys(L, 2, {"group", "bucket_mb", "backward_passes"}, "dist.data_parallel");
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "group");
    if (!lua_isnil(L, -1)) group = lx_group_arg(L, lua_gettop(L), "dist.data_parallel: option 'group'");
    lua_pop(L, 1);
  }
  double mb = lx_opt_number(L, 2, "bucket_mb", 25, "dist.data_parallel");
  auto buckets = std::make_shared<dist::GradBuckets>(std::move(params), group, static_cast<int64_t>(mb * (1 << 20)));
  buckets->set_backward_passes(static_cast<int>(lx_opt_number(L, 2, "backward_passes", 1, "dist.data_parallel")));
  void* p = lua_newuserdata(L, sizeof(BucketsPtr));
  new (p) BucketsPtr(std::move(buckets));
  luaL_getmetatable(L, "slapo.DataParallel");
  lua_setmetatable(L, -2);
  return 1;
}

const luaL_Reg data_parallel_methods[] = {{"finish", w_DataParallel_finish},
                                          {"set_backward_passes", w_DataParallel_set_backward_passes},
                                          {"buckets", w_DataParallel_buckets},
                                          {"started_early", w_DataParallel_started_early},
                                          {nullptr, nullptr}};
const luaL_Reg data_parallel_meta[] = {{"__gc", w_DataParallel_gc}, {nullptr, nullptr}};

}  // namespace

void open_data_parallel(lua_State* L) {
  lx_new_class(L, "slapo.DataParallel", data_parallel_methods, data_parallel_meta, nullptr);
  lua_getfield(L, -1, "dist");
  lx_set_func(L, "data_parallel", w_data_parallel);
  lua_pop(L, 1);
}

}  // namespace slapo
