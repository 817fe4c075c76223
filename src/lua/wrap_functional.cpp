// slapo.F: functional ops on tensors, named as torch.nn.functional's.
#include "core/error.h"
#include "lua/runtime.h"
#include "lua/wrap.h"
#include "models/transformer_ops.h"

namespace slapo {

namespace {

int push(lua_State* L, at::Tensor t) {
  lx_push_tensor(L, std::move(t));
  return 1;
}
at::Tensor opt_tensor(lua_State* L, int idx) { return lua_isnoneornil(L, idx) ? at::Tensor() : lx_check_tensor(L, idx); }
int64_t opt_dim(lua_State* L, int idx) { return static_cast<int64_t>(luaL_optnumber(L, idx, -1)); }

int w_F_relu(lua_State* L) { return push(L, at::relu(lx_check_tensor(L, 1))); }
int w_F_silu(lua_State* L) { return push(L, at::silu(lx_check_tensor(L, 1))); }
int w_F_tanh(lua_State* L) { return push(L, at::tanh(lx_check_tensor(L, 1))); }
int w_F_sigmoid(lua_State* L) { return push(L, at::sigmoid(lx_check_tensor(L, 1))); }
int w_F_gelu(lua_State* L) {
  std::string approximate = luaL_optstring(L, 2, "none");
  if (approximate != "none" && approximate != "tanh")
    luaL_error(L, "F.gelu: approximate must be 'none' or 'tanh', got '%s'", approximate.c_str());
  return push(L, at::gelu(lx_check_tensor(L, 1), approximate));
}
int w_F_softmax(lua_State* L) { return push(L, at::softmax(lx_check_tensor(L, 1), opt_dim(L, 2))); }
int w_F_log_softmax(lua_State* L) { return push(L, at::log_softmax(lx_check_tensor(L, 1), opt_dim(L, 2))); }
int w_F_layer_norm(lua_State* L) {
  auto& x = lx_check_tensor(L, 1);
  auto shape = lx_check_shape(L, 2, "F.layer_norm");
  return push(L, at::layer_norm(x, shape, opt_tensor(L, 3), opt_tensor(L, 4), luaL_optnumber(L, 5, 1e-5)));
}
int w_F_dropout(lua_State* L) {
  auto& x = lx_check_tensor(L, 1);
  double p = luaL_optnumber(L, 2, 0.5);
  if (p < 0 || p > 1) luaL_error(L, "F.dropout: p must be in [0, 1], got %f", p);
  bool training = lua_isnoneornil(L, 3) ? true : lua_toboolean(L, 3);
  return push(L, at::dropout(x, p, training));
}
int w_F_linear(lua_State* L) { return push(L, at::linear(lx_check_tensor(L, 1), lx_check_tensor(L, 2), opt_tensor(L, 3))); }
int w_F_embedding(lua_State* L) { return push(L, at::embedding(lx_check_tensor(L, 2), lx_check_tensor(L, 1))); }
int w_F_cross_entropy(lua_State* L) {
  auto& logits = lx_check_tensor(L, 1);
  auto& target = lx_check_tensor(L, 2);
  return push(L, at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), target.reshape({-1}), {},
                                        at::Reduction::Mean, -100));
}
int w_F_mse_loss(lua_State* L) { return push(L, at::mse_loss(lx_check_tensor(L, 1), lx_check_tensor(L, 2))); }
// (q, k, v, {mask=, causal=, dropout=}); q, k, v: [B, H, S, D]
int w_F_sdpa(lua_State* L) {
  auto& q = lx_check_tensor(L, 1);
  auto& k = lx_check_tensor(L, 2);
  auto& v = lx_check_tensor(L, 3);
  lx_check_option_keys(L, 4, {"mask", "causal", "dropout"}, "F.scaled_dot_product_attention");
  bool causal = lx_opt_bool(L, 4, "causal", false, "F.scaled_dot_product_attention");
  double p = lx_opt_number(L, 4, "dropout", 0.0, "F.scaled_dot_product_attention");
  c10::optional<at::Tensor> mask;
  if (lua_istable(L, 4)) {
    lua_getfield(L, 4, "mask");
    if (!lua_isnil(L, -1)) mask = lx_check_tensor(L, -1);
    lua_pop(L, 1);
  }
  auto causal_mask = additive_mask(c10::nullopt, q.size(-2), k.size(-2), causal, q.options());
  if (causal_mask) mask = mask ? *mask + *causal_mask : *causal_mask;
  auto probs = attention_probs(q, k, mask);
  if (p > 0) probs = at::dropout(probs, p, true);
  return push(L, at::matmul(probs, v));
}

const luaL_Reg functional[] = {
    {"relu", w_F_relu},           {"gelu", w_F_gelu},       {"silu", w_F_silu},
    {"tanh", w_F_tanh},           {"sigmoid", w_F_sigmoid}, {"softmax", w_F_softmax},
    {"log_softmax", w_F_log_softmax}, {"layer_norm", w_F_layer_norm}, {"dropout", w_F_dropout},
    {"linear", w_F_linear},       {"embedding", w_F_embedding}, {"cross_entropy", w_F_cross_entropy},
    {"mse_loss", w_F_mse_loss},   {"scaled_dot_product_attention", w_F_sdpa}, {nullptr, nullptr}};

}  // namespace

void open_functional(lua_State* L) {
  lua_newtable(L);
  lx_set_funcs(L, functional);
  lua_setfield(L, -2, "F");
}

}  // namespace slapo
