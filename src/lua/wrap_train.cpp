// The C++ pieces of slapo.train: clock, gradient clipping, peak FLOP/s, memory.
#include <unistd.h>

#include <chrono>

#include "core/error.h"
#include "lua/runtime.h"
#include "lua/wrap.h"
#include "train/train_utils.h"

namespace slapo {

namespace {

int w_clock(lua_State* L) {
  lua_pushnumber(L, std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count());
  return 1;
}

// clip_grad_norm(model, max_norm [, group]) -> norm before clipping
int w_clip_grad_norm(lua_State* L) {
  auto& m = lx_check_module(L, 1);
  double max_norm = luaL_checknumber(L, 2);
  if (!(max_norm > 0)) luaL_error(L, "clip_grad_norm: max_norm must be positive, got %f", max_norm);
  lua_pushnumber(L, clip_grad_norm(*m, max_norm, lua_isnoneornil(L, 3) ? nullptr : lx_group_arg(L, 3)));
  return 1;
}

int w_peak_flops(lua_State* L) {
  lua_pushnumber(L, measure_peak_flops());
  return 1;
}

int w_stdout_is_terminal(lua_State* L) {
  lua_pushboolean(L, ::isatty(STDOUT_FILENO));
  return 1;
}

int w_memory_mib(lua_State* L) {
  lua_pushnumber(L, resident_memory_mib());
  return 1;
}

const luaL_Reg train_functions[] = {{"clock", w_clock},
                                    {"clip_grad_norm", w_clip_grad_norm},
                                    {"measure_peak_flops", w_peak_flops},
                                    {"memory_mib", w_memory_mib},
                                    {"stdout_is_terminal", w_stdout_is_terminal},
                                    {nullptr, nullptr}};

}  // namespace

void open_train(lua_State* L) { lx_set_funcs(L, train_functions); }

}  // namespace slapo
