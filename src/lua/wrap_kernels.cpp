// slapo.kernels: the fused kernels of kernels.h, for eager code and slapo.op replacements.
#include "kernels.h"
#include "lua/runtime.h"
#include "lua/wrap.h"

namespace slapo {

namespace {

int push(lua_State* L, at::Tensor t) {
  lx_push_tensor(L, std::move(t));
  return 1;
}

// bias_gelu(x, bias, {approximate = "none" | "tanh"})
int w_bias_gelu(lua_State* L) {
  lx_check_option_keys(L, 3, {"approximate"}, "kernels.bias_gelu");
  std::string approximate = lx_opt_string(L, 3, "approximate", "none", "kernels.bias_gelu");
  if (approximate != "none" && approximate != "tanh")
    luaL_error(L, "kernels.bias_gelu: approximate must be 'none' or 'tanh', got '%s'", approximate.c_str());
  return push(L, kernels::bias_gelu(lx_check_tensor(L, 1), lx_check_tensor(L, 2), approximate == "tanh"));
}
int w_rms_norm(lua_State* L) {
  return push(L, kernels::rms_norm(lx_check_tensor(L, 1), lx_check_tensor(L, 2), luaL_optnumber(L, 3, 1e-6)));
}
int w_swiglu(lua_State* L) { return push(L, kernels::swiglu(lx_check_tensor(L, 1), lx_check_tensor(L, 2))); }
int w_rope(lua_State* L) {
  return push(L, kernels::rope(lx_check_tensor(L, 1), lx_check_tensor(L, 2), lx_check_tensor(L, 3)));
}

// attention(q, k, v, {causal = false, backend = "auto" | "flash" | "efficient"})
int w_attention(lua_State* L) {
  lx_check_option_keys(L, 4, {"causal", "backend"}, "kernels.attention");
  bool causal = lx_opt_bool(L, 4, "causal", false, "kernels.attention");
  std::string backend = lx_opt_string(L, 4, "backend", "auto", "kernels.attention");
  auto &q = lx_check_tensor(L, 1), &k = lx_check_tensor(L, 2), &v = lx_check_tensor(L, 3);
  if (backend == "auto") return push(L, kernels::attention(q, k, v, causal));
  return push(L, kernels::attention_sdpa(q, k, v, causal, backend));
}

// sdpa_backends() -> {"flash", "efficient"} in a CUDA build of LibTorch 2.x, else {}
int w_sdpa_backends(lua_State* L) {
  auto names = kernels::sdpa_backends();
  lua_createtable(L, static_cast<int>(names.size()), 0);
  for (size_t i = 0; i < names.size(); ++i) {
    lua_pushstring(L, names[i].c_str());
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}

// masked_softmax(scores, mask, scale)
int w_masked_softmax(lua_State* L) {
  return push(L, kernels::masked_softmax(lx_check_tensor(L, 1), lx_check_tensor(L, 2), luaL_optnumber(L, 3, 1.0)));
}

// bias_dropout_add_layer_norm(x, bias, residual, weight, ln_bias, {p = 0, training = false, eps = 1e-5})
int w_bias_dropout_add_layer_norm(lua_State* L) {
  const char* fn = "kernels.bias_dropout_add_layer_norm";
  lx_check_option_keys(L, 6, {"p", "training", "eps"}, fn);
  return push(L, kernels::bias_dropout_add_layer_norm(lx_check_tensor(L, 1), lx_check_tensor(L, 2), lx_check_tensor(L, 3),
                                                      lx_check_tensor(L, 4), lx_check_tensor(L, 5),
                                                      lx_opt_number(L, 6, "p", 0.0, fn), lx_opt_bool(L, 6, "training", false, fn),
                                                      lx_opt_number(L, 6, "eps", 1e-5, fn)));
}

const luaL_Reg kernel_functions[] = {{"attention", w_attention},
                                     {"sdpa_backends", w_sdpa_backends},
                                     {"bias_gelu", w_bias_gelu},
                                     {"masked_softmax", w_masked_softmax},
                                     {"bias_dropout_add_layer_norm", w_bias_dropout_add_layer_norm},
                                     {"rms_norm", w_rms_norm},
                                     {"swiglu", w_swiglu},
                                     {"rope", w_rope},
                                     {nullptr, nullptr}};

}  // namespace

void open_kernels(lua_State* L) {
  lua_newtable(L);
  lx_set_funcs(L, kernel_functions);
  lua_setfield(L, -2, "kernels");
}

}  // namespace slapo
