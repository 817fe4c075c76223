// slapo.cuda: whether this build and machine can run CUDA tensors (specs and examples branch on
// it; a CPU LibTorch always answers no).
#include <regex>
#include <torch/cuda.h>

#include "lua/runtime.h"
#include "lua/wrap.h"

namespace slapo {

namespace {

int w_is_available(lua_State* L) {
  lua_pushboolean(L, torch::cuda::is_available());
  return 1;
}
int w_device_count(lua_State* L) {
  lua_pushinteger(L, static_cast<lua_Integer>(torch::cuda::device_count()));
  return 1;
}
// Waits for the current device's queued kernels (for timing from Lua).
int w_synchronize(lua_State* L) {
  if (!torch::cuda::is_available()) return luaL_error(L, "cuda.synchronize: no CUDA device in this build or machine");
  torch::cuda::synchronize();
  return 0;
}

const luaL_Reg cuda_functions[] = {
    {"is_available", w_is_available}, {"device_count", w_device_count}, {"synchronize", w_synchronize}, {nullptr, nullptr}};

}  // namespace

void lx_check_device_target(lua_State* L, const std::string& target, const char* fn) {
  // the devices this program runs on, checked before LibTorch lists every backend it knows
  static const std::regex device(R"((cpu|meta|cuda)(:[0-9]+)?)");
  if (!std::regex_match(target, device))
    luaL_error(L, "%s: unknown device '%s' (devices: cpu, cuda, cuda:N, meta)", fn, target.c_str());
  if (target.rfind("cuda", 0) == 0 && !torch::cuda::is_available())
    luaL_error(L, "%s: '%s' needs a CUDA device, and this %s (slapo.cuda.is_available() is false; devices here: cpu)",
               fn, target.c_str(),
               torch::cuda::device_count() == 0 ? "build or machine has none" : "machine's GPUs are not usable");
}

void open_cuda(lua_State* L) {
  lua_newtable(L);
  lx_set_funcs(L, cuda_functions);
  lua_setfield(L, -2, "cuda");
}

}  // namespace slapo
