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
std::string shape_text(const at::Tensor& t) { return fmt::format("[{}]", fmt::join(t.sizes(), ", ")); }

// The dim of softmax-like functions is required: PyTorch's implicit choice is deprecated and
// guesses wrong for 1-d and 3-d inputs.
int64_t required_dim(lua_State* L, int idx, const at::Tensor& x, const char* fn) {
  if (lua_type(L, idx) != LUA_TNUMBER)
    throw Error(fmt::format("{}(x, dim): dim is required, e.g. {}(x, -1) over the last of x's {} dims; got {}", fn, fn,
                            x.dim(), lua_isnoneornil(L, idx) ? "none" : lx_type_name(L, idx)));
  int64_t n = std::max<int64_t>(x.dim(), 1);
  return lx_check_integer_value(lua_tonumber(L, idx), "dim", static_cast<double>(-n), static_cast<double>(n - 1), fn);
}

template <at::Tensor (*op)(const at::Tensor&)>
int elementwise(lua_State* L, const char* fn) {
  lx_check_arg_count(L, 1, fn, fmt::format("{}(x)", fn).c_str());
  return push(L, op(lx_check_tensor(L, 1)));
}
int w_F_relu(lua_State* L) { return elementwise<at::relu>(L, "F.relu"); }
int w_F_silu(lua_State* L) { return elementwise<at::silu>(L, "F.silu"); }
int w_F_tanh(lua_State* L) { return elementwise<at::tanh>(L, "F.tanh"); }
int w_F_sigmoid(lua_State* L) { return elementwise<at::sigmoid>(L, "F.sigmoid"); }
int w_F_gelu(lua_State* L) {
  lx_check_arg_count(L, 2, "F.gelu", "F.gelu(x [, approximate])");
  std::string approximate = luaL_optstring(L, 2, "none");
  if (approximate != "none" && approximate != "tanh")
    luaL_error(L, "F.gelu: approximate must be 'none' or 'tanh', got '%s'", approximate.c_str());
  return push(L, at::gelu(lx_check_tensor(L, 1), approximate));
}
int w_F_softmax(lua_State* L) {
  lx_check_arg_count(L, 2, "F.softmax", "F.softmax(x, dim)");
  auto& x = lx_check_tensor(L, 1);
  return push(L, at::softmax(x, required_dim(L, 2, x, "F.softmax")));
}
int w_F_log_softmax(lua_State* L) {
  lx_check_arg_count(L, 2, "F.log_softmax", "F.log_softmax(x, dim)");
  auto& x = lx_check_tensor(L, 1);
  return push(L, at::log_softmax(x, required_dim(L, 2, x, "F.log_softmax")));
}
int w_F_layer_norm(lua_State* L) {
  lx_check_arg_count(L, 5, "F.layer_norm", "F.layer_norm(x, shape [, weight [, bias [, eps]]])");
  auto& x = lx_check_tensor(L, 1);
  auto shape = lx_check_shape(L, 2, "F.layer_norm");
  return push(L, at::layer_norm(x, shape, opt_tensor(L, 3), opt_tensor(L, 4), luaL_optnumber(L, 5, 1e-5)));
}
int w_F_dropout(lua_State* L) {
  lx_check_arg_count(L, 3, "F.dropout", "F.dropout(x [, p [, training]])");
  auto& x = lx_check_tensor(L, 1);
  double p = luaL_optnumber(L, 2, 0.5);
  if (p < 0 || p > 1) luaL_error(L, "F.dropout: p must be in [0, 1], got %f", p);
  bool training = lx_check_opt_boolean(L, 3, true, "F.dropout", "training");
  return push(L, at::dropout(x, p, training));
}
int w_F_linear(lua_State* L) {
  lx_check_arg_count(L, 3, "F.linear", "F.linear(x, weight [, bias])");
  return push(L, at::linear(lx_check_tensor(L, 1), lx_check_tensor(L, 2), opt_tensor(L, 3)));
}

// The first id a table of `rows` rows cannot hold, with the valid range; asked only after ATen
// refused the call.
void explain_out_of_range(const at::Tensor& ids, int64_t rows, c10::optional<int64_t> ignored, const char* fn,
                          const char* what, const char* table) {
  auto bad = id_out_of_range(ids, rows, ignored);
  if (!bad) return;
  throw Error(fmt::format("{}: {} {} is out of range for {} {} (valid: 0 .. {}{})", fn, what, *bad, rows, table,
                          rows - 1, ignored ? fmt::format(", or {} to ignore", *ignored) : ""));
}
void check_integer_ids(const at::Tensor& ids, const char* fn, const char* what) {
  if (!at::isIntegralType(ids.scalar_type(), /*includeBool=*/false))
    throw Error(fmt::format("{}: {} must hold integer ids (int64), got {} of shape {}", fn, what,
                            tensor_dtype_name(ids.scalar_type()), shape_text(ids)));
}

// (ids, weight): weight is the [rows, width] table
int w_F_embedding(lua_State* L) {
  lx_check_arg_count(L, 2, "F.embedding", "F.embedding(ids, weight)");
  auto& ids = lx_check_tensor(L, 1);
  auto& weight = lx_check_tensor(L, 2);
  check_integer_ids(ids, "F.embedding", "ids");
  try {
    return push(L, at::embedding(weight, ids));
  } catch (const c10::Error&) {
    if (weight.dim() == 2) explain_out_of_range(ids, weight.size(0), c10::nullopt, "F.embedding", "id", "rows of the table");
    throw;
  }
}
int w_F_cross_entropy(lua_State* L) {
  lx_check_arg_count(L, 2, "F.cross_entropy", "F.cross_entropy(logits, target)");
  auto& logits = lx_check_tensor(L, 1);
  auto& target = lx_check_tensor(L, 2);
  check_integer_ids(target, "F.cross_entropy", "the target (class ids)");
  if (logits.dim() == 0 || logits.numel() / logits.size(-1) != target.numel())
    throw Error(fmt::format("F.cross_entropy: logits {} have {} rows of {} classes, the target {} has {} ids",
                            shape_text(logits), logits.dim() ? logits.numel() / logits.size(-1) : 0,
                            logits.dim() ? logits.size(-1) : 0, shape_text(target), target.numel()));
  try {
    return push(L, at::cross_entropy_loss(logits.reshape({-1, logits.size(-1)}), target.reshape({-1}), {},
                                          at::Reduction::Mean, -100));
  } catch (const c10::Error&) {
    explain_out_of_range(target, logits.size(-1), -100, "F.cross_entropy", "target", "classes");
    throw;
  }
}
int w_F_mse_loss(lua_State* L) {
  lx_check_arg_count(L, 2, "F.mse_loss", "F.mse_loss(input, target)");
  auto& input = lx_check_tensor(L, 1);
  auto& target = lx_check_tensor(L, 2);
  if (input.sizes() != target.sizes())  // PyTorch only warns, and the broadcast loss is rarely what was meant
    throw Error(fmt::format("F.mse_loss: input {} and target {} differ in shape; reshape or expand one to the other",
                            shape_text(input), shape_text(target)));
  return push(L, at::mse_loss(input, target));
}
// (q, k, v, {mask=, causal=, dropout=}); q, k, v: [B, H, S, D]
int w_F_sdpa(lua_State* L) {
  lx_check_arg_count(L, 4, "F.scaled_dot_product_attention", "F.scaled_dot_product_attention(q, k, v [, opts])");
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
