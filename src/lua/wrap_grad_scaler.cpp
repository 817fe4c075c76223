// slapo.optim.grad_scaler: dynamic loss scaling for float16 training (train/autocast.h).
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

static_assert(std::is_trivially_destructible_v<GradScaler>, "GradScaler boxes have no __gc");

const luaL_Reg scaler_methods[] = {
    {"scale", w_scale}, {"unscale", w_unscale}, {"update", w_update}, {"value", w_value}, {nullptr, nullptr}};

}  // namespace

void add_grad_scaler(lua_State* L) {
  lx_new_class(L, "slapo.GradScaler", scaler_methods, nullptr, nullptr);  // trivially destructible
  lx_set_func(L, "grad_scaler", w_grad_scaler);
}

}  // namespace slapo
