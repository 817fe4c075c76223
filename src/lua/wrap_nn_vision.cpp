// slapo.nn's convolutional layers (Conv2d, BatchNorm2d, MaxPool2d, AdaptiveAvgPool2d) and
// slapo.models.resnet, with torchvision's names and defaults.
#include <cmath>

#include "core/error.h"
#include "lua/empty_weights.h"
#include "lua/runtime.h"
#include "lua/wrap.h"
#include "models/resnet.h"
#include "models/vision_layers.h"

namespace slapo {

namespace {

int64_t whole_number(lua_State* L, int idx, const char* fn, const char* what, int64_t lo) {
  if (lua_type(L, idx) != LUA_TNUMBER)
    throw Error(fmt::format("{}: {} must be an integer, got {}", fn, what, luaL_typename(L, idx)));
  return lx_check_integer_value(lua_tonumber(L, idx), what, static_cast<double>(lo), 1e9, fn);
}

// 3 or {3, 5}: a size for both spatial dims, or one each.
std::array<int64_t, 2> pair_arg(lua_State* L, int idx, const char* fn, const char* what, int64_t lo) {
  if (lua_istable(L, idx)) {
    if (lua_objlen(L, idx) != 2) throw Error(fmt::format("{}: {} must be a number or {{h, w}}", fn, what));
    std::array<int64_t, 2> out{};
    for (int i = 0; i < 2; ++i) {
      lua_rawgeti(L, idx, i + 1);
      out[static_cast<size_t>(i)] = whole_number(L, -1, fn, what, lo);
      lua_pop(L, 1);
    }
    return out;
  }
  int64_t n = whole_number(L, idx, fn, what, lo);
  return {n, n};
}

std::array<int64_t, 2> opt_pair(lua_State* L, int table, const char* key, std::array<int64_t, 2> fallback,
                                const char* fn, int64_t lo) {
  if (!lua_istable(L, table)) return fallback;
  lua_getfield(L, table, key);
  auto out = lua_isnil(L, -1) ? fallback : pair_arg(L, lua_gettop(L), fn, key, lo);
  lua_pop(L, 1);
  return out;
}

int push(lua_State* L, std::shared_ptr<Module> m) {
  lx_push_module(L, std::move(m));
  return 1;
}

// nn.Conv2d(in, out, kernel, {stride = 1, padding = 0, dilation = 1, groups = 1, bias = true})
int w_nn_Conv2d(lua_State* L) {
  const char* fn = "nn.Conv2d";
  int64_t in = whole_number(L, 1, fn, "in_channels", 1), out = whole_number(L, 2, fn, "out_channels", 1);
  Conv2d::Options o;
  o.kernel = pair_arg(L, 3, fn, "kernel_size", 1);
  lx_check_option_keys(L, 4, {"stride", "padding", "dilation", "groups", "bias"}, fn);
  o.stride = opt_pair(L, 4, "stride", {1, 1}, fn, 1);
  o.padding = opt_pair(L, 4, "padding", {0, 0}, fn, 0);
  o.dilation = opt_pair(L, 4, "dilation", {1, 1}, fn, 1);
  o.groups = static_cast<int64_t>(lx_opt_number_in(L, 4, "groups", 1, 1, 1e9, fn));
  o.bias = lx_opt_bool(L, 4, "bias", true, fn);
  if (lx_empty_weights()) return push(L, std::make_shared<Conv2d>(in, out, o, at::TensorOptions().device(at::kMeta)));
  auto m = std::make_shared<Conv2d>(in, out, o);
  m->reset_parameters();
  return push(L, m);
}

// nn.BatchNorm2d(n, {eps = 1e-5, momentum = 0.1})
int w_nn_BatchNorm2d(lua_State* L) {
  const char* fn = "nn.BatchNorm2d";
  int64_t n = whole_number(L, 1, fn, "num_features", 1);
  lx_check_option_keys(L, 2, {"eps", "momentum"}, fn);
  double eps = lx_opt_number_in(L, 2, "eps", 1e-5, 1e-30, 1, fn);
  double momentum = lx_opt_number_in(L, 2, "momentum", 0.1, 0, 1, fn);
  if (lx_empty_weights())
    return push(L, std::make_shared<BatchNorm2d>(n, eps, momentum, at::TensorOptions().device(at::kMeta)));
  return push(L, std::make_shared<BatchNorm2d>(n, eps, momentum));
}

// nn.MaxPool2d(kernel, {stride = kernel, padding = 0})
int w_nn_MaxPool2d(lua_State* L) {
  const char* fn = "nn.MaxPool2d";
  auto kernel = pair_arg(L, 1, fn, "kernel_size", 1);
  lx_check_option_keys(L, 2, {"stride", "padding"}, fn);
  auto padding = opt_pair(L, 2, "padding", {0, 0}, fn, 0);
  if (padding[0] * 2 > kernel[0] || padding[1] * 2 > kernel[1])
    throw Error(fmt::format("{}: padding ({}, {}) must be at most half the kernel ({}, {})", fn, padding[0], padding[1],
                            kernel[0], kernel[1]));
  return push(L, std::make_shared<MaxPool2d>(kernel, opt_pair(L, 2, "stride", kernel, fn, 1), padding));
}

// nn.AdaptiveAvgPool2d(size or {h, w})
int w_nn_AdaptiveAvgPool2d(lua_State* L) {
  return push(L, std::make_shared<AdaptiveAvgPool2d>(pair_arg(L, 1, "nn.AdaptiveAvgPool2d", "output_size", 1)));
}

// models.resnet("resnet50" | {block =, layers = {3, 4, 6, 3}, width_per_group =, groups =, num_classes =,
// in_channels =}, {device =})
int w_models_resnet(lua_State* L) {
  const char* fn = "models.resnet";
  ResNetConfig c;
  if (lua_type(L, 1) == LUA_TSTRING) {
    c = ResNetConfig::preset(lua_tostring(L, 1));
  } else if (lua_istable(L, 1)) {
    lx_check_option_keys(L, 1, {"block", "layers", "width_per_group", "groups", "num_classes", "in_channels"}, fn);
    c.block = lx_opt_string(L, 1, "block", c.block, fn);
    lua_getfield(L, 1, "layers");
    if (!lua_isnil(L, -1)) {
      if (!lua_istable(L, -1) || lua_objlen(L, -1) != 4)
        throw Error(fmt::format("{}: layers must be 4 block counts, one per stage ({{3, 4, 6, 3}})", fn));
      for (int i = 0; i < 4; ++i) {
        lua_rawgeti(L, -1, i + 1);
        c.layers[static_cast<size_t>(i)] = whole_number(L, lua_gettop(L), fn, "layers[i]", 1);
        lua_pop(L, 1);
      }
    }
    lua_pop(L, 1);
    c.width_per_group = static_cast<int64_t>(lx_opt_number_in(L, 1, "width_per_group", 64, 1, 1e6, fn));
    c.groups = static_cast<int64_t>(lx_opt_number_in(L, 1, "groups", 1, 1, 1e6, fn));
    c.num_classes = static_cast<int64_t>(lx_opt_number_in(L, 1, "num_classes", 1000, 1, 1e9, fn));
    c.in_channels = static_cast<int64_t>(lx_opt_number_in(L, 1, "in_channels", 3, 1, 1e6, fn));
  } else {
    throw Error(fmt::format("{}: expected a preset name ({}) or a table of fields, got {}", fn,
                            fmt::join(ResNetConfig::preset_names(), ", "), luaL_typename(L, 1)));
  }
  lx_check_option_keys(L, 2, {"device"}, fn);
  auto device = lx_opt_string(L, 2, "device", lx_empty_weights() ? "meta" : "cpu", fn);
  lx_check_device_target(L, device, fn);
  BuildOptions o;
  o.tensor_options = at::TensorOptions().device(at::Device(device));
  return push(L, build_resnet(c, o));
}

const luaL_Reg vision_layers[] = {{"Conv2d", w_nn_Conv2d},
                                  {"BatchNorm2d", w_nn_BatchNorm2d},
                                  {"MaxPool2d", w_nn_MaxPool2d},
                                  {"AdaptiveAvgPool2d", w_nn_AdaptiveAvgPool2d},
                                  {nullptr, nullptr}};

}  // namespace

void open_nn_vision(lua_State* L) {
  lua_getfield(L, -1, "nn");
  lx_set_funcs(L, vision_layers);
  lua_pop(L, 1);
  lua_getfield(L, -1, "models");
  lx_set_func(L, "resnet", w_models_resnet);
  lua_pop(L, 1);
}

}  // namespace slapo
