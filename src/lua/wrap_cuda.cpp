// slapo.cuda: whether this build and machine can run CUDA tensors (specs and examples branch on
// it; a CPU LibTorch always answers no).
#include <regex>
#include <utility>
#include <torch/cuda.h>

#include "lua/runtime.h"
#include "lua/wrap.h"
#include "train/cuda_memory.h"

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

// The GPU index of memory_stats' and reset_peak_memory_stats' optional argument (default 0),
// checked against the machine's GPUs.
int gpu_argument(lua_State* L, const char* fn) {
  int count = static_cast<int>(torch::cuda::device_count());
  if (!torch::cuda::is_available() || count == 0)
    luaL_error(L, "cuda.%s: no CUDA device in this build or machine (slapo.cuda.is_available() is false)", fn);
  lua_Integer device = luaL_optinteger(L, 1, 0);
  if (device < 0 || device >= count)
    luaL_error(L, "cuda.%s: GPU %d is not on this machine (valid: 0 .. %d)", fn, static_cast<int>(device), count - 1);
  return static_cast<int>(device);
}

int push_cuda_memory(lua_State* L, int device, bool reset_peak, const char* fn) {
  auto memory = cuda_memory(device, reset_peak);
  if (!memory) return luaL_error(L, "cuda.%s: this build of LibTorch has no CUDA", fn);
  lua_createtable(L, 0, 4);
  for (auto [name, mib] : {std::pair<const char*, double>{"allocated_mib", memory->allocated_mib},
                           {"reserved_mib", memory->reserved_mib},
                           {"peak_allocated_mib", memory->peak_allocated_mib},
                           {"peak_reserved_mib", memory->peak_reserved_mib}}) {
    lua_pushnumber(L, mib);
    lua_setfield(L, -2, name);
  }
  return 1;
}

// memory_stats([gpu]) -> {allocated_mib, reserved_mib, peak_allocated_mib, peak_reserved_mib}
int w_memory_stats(lua_State* L) { return push_cuda_memory(L, gpu_argument(L, "memory_stats"), false, "memory_stats"); }

// reset_peak_memory_stats([gpu]): the peaks start again from what is held now; returns the counts before
int w_reset_peak_memory_stats(lua_State* L) {
  return push_cuda_memory(L, gpu_argument(L, "reset_peak_memory_stats"), true, "reset_peak_memory_stats");
}

const luaL_Reg cuda_functions[] = {{"is_available", w_is_available},
                                   {"device_count", w_device_count},
                                   {"synchronize", w_synchronize},
                                   {"memory_stats", w_memory_stats},
                                   {"reset_peak_memory_stats", w_reset_peak_memory_stats},
                                   {nullptr, nullptr}};

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
