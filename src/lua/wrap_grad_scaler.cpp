// slapo.optim.grad_scaler: dynamic loss scaling for float16 training (train/autocast.h).
#include <cmath>
#include <type_traits>

#include "core/error.h"
#include "lua/runtime.h"
#include "lua/wrap.h"
#include "train/autocast.h"

namespace slapo {

namespace {

GradScaler& check_scaler(lua_State* L, int idx) {
  return *static_cast<GradScaler*>(luaL_checkudata(L, idx, "slapo.GradScaler"));
}

// optim.grad_scaler({init_scale = 65536, growth_factor = 2, backoff_factor = 0.5, growth_interval = 2000})
int w_grad_scaler(lua_State* L) {
  const char* fn = "optim.grad_scaler";
  lx_check_option_keys(L, 1, {"init_scale", "growth_factor", "backoff_factor", "growth_interval"}, fn);
  lx_check_integer_value(lx_opt_number(L, 1, "growth_interval", 2000, fn), "growth_interval", 1, 9.0e15, fn);
  GradScaler scaler(lx_opt_number(L, 1, "init_scale", 65536.0, fn), lx_opt_number(L, 1, "growth_factor", 2.0, fn),
                    lx_opt_number(L, 1, "backoff_factor", 0.5, fn),
                    static_cast<int64_t>(lx_opt_number(L, 1, "growth_interval", 2000, fn)));
  new (lua_newuserdata(L, sizeof(GradScaler))) GradScaler(scaler);
  luaL_getmetatable(L, "slapo.GradScaler");
  lua_setmetatable(L, -2);
  return 1;
}

// scaler:scale(loss) -> loss * scale
int w_scale(lua_State* L) {
  lx_push_tensor(L, check_scaler(L, 1).scale(lx_check_tensor(L, 2)));
  return 1;
}

// scaler:unscale(model) -> true when a gradient holds an inf or NaN (skip that step)
int w_unscale(lua_State* L) {
  std::vector<at::Tensor> params;
  for (auto& [name, p] : unique_named_parameters(*lx_check_module(L, 2))) params.push_back(p);
  lua_pushboolean(L, check_scaler(L, 1).unscale(params));
  return 1;
}

// scaler:update(found_inf)
int w_update(lua_State* L) {
  check_scaler(L, 1).update(lua_toboolean(L, 2));
  return 0;
}

int w_value(lua_State* L) {
  lua_pushnumber(L, check_scaler(L, 1).value());
  return 1;
}

// scaler:state() -> {scale =, clean_steps =}; scaler:set_state(that table)
int w_state(lua_State* L) {
  auto& scaler = check_scaler(L, 1);
  lua_createtable(L, 0, 2);
  lua_pushnumber(L, scaler.value());
  lua_setfield(L, -2, "scale");
  lua_pushnumber(L, static_cast<lua_Number>(scaler.clean_steps()));
  lua_setfield(L, -2, "clean_steps");
  return 1;
}

int w_set_state(lua_State* L) {
  const char* fn = "grad_scaler:set_state";
  auto& scaler = check_scaler(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  lx_check_option_keys(L, 2, {"scale", "clean_steps"}, fn);
  double scale = lx_opt_number(L, 2, "scale", -1, fn);
  double clean = lx_opt_number(L, 2, "clean_steps", -1, fn);
  if (!(scale > 0) || !std::isfinite(scale) || clean < 0 || clean != std::floor(clean))
    throw Error(fmt::format("{}: expected {{scale = a positive number, clean_steps = a count}}, got scale {}, "
                            "clean_steps {}", fn, scale, clean));
  scaler.set_state(scale, static_cast<int64_t>(clean));
  return 0;
}

static_assert(std::is_trivially_destructible_v<GradScaler>, "GradScaler boxes have no __gc");

const luaL_Reg scaler_methods[] = {
    {"scale", w_scale}, {"unscale", w_unscale}, {"update", w_update}, {"value", w_value},
    {"state", w_state}, {"set_state", w_set_state}, {nullptr, nullptr}};

}  // namespace

void add_grad_scaler(lua_State* L) {
  lx_new_class(L, "slapo.GradScaler", scaler_methods, nullptr, nullptr);  // trivially destructible
  lx_set_func(L, "grad_scaler", w_grad_scaler);
}

}  // namespace slapo
