// slapo.Tensor: the torch-like tensor subset scripts use to build inputs, compare and train.
#include <cmath>
#include <sstream>

#include "core/error.h"
#include "distributed/gradient_reductions.h"
#include "graph/traced_graph.h"
#include "lua/runtime.h"
#include "lua/tensor_gc.h"
#include "lua/wrap.h"

namespace slapo {

namespace {

const std::vector<std::pair<std::string, at::ScalarType>>& dtype_names() {
  static const std::vector<std::pair<std::string, at::ScalarType>> names = {
      {"float32", at::kFloat}, {"float64", at::kDouble}, {"float16", at::kHalf}, {"bfloat16", at::kBFloat16},
      {"int64", at::kLong},    {"int32", at::kInt},      {"int8", at::kChar},    {"uint8", at::kByte},
      {"bool", at::kBool}};
  return names;
}

int64_t check_dim(lua_State* L, int idx, const at::Tensor& t, const char* fn) {
  int64_t n = t.dim();
  // NaN, fractions and 1e300 are refused with the dims there are, not truncated to some dim
  double value = luaL_checknumber(L, idx);
  if (!(std::abs(value) < 1e9) || value != std::floor(value))
    lx_check_integer_value(value, "dim", static_cast<double>(-n), static_cast<double>(std::max<int64_t>(n, 1) - 1), fn);
  auto d = static_cast<int64_t>(value);
  if (d < -n || d >= std::max<int64_t>(n, 1))
    luaL_error(L, "%s: dim %d is out of range for a %d-d tensor (valid: %d .. %d, 0-based)", fn, static_cast<int>(d),
               static_cast<int>(n), static_cast<int>(-n), static_cast<int>(n - 1));
  return d;
}

at::Tensor check_operand(lua_State* L, int idx, const at::Tensor& like, const char* fn) {
  if (lua_isnumber(L, idx)) return torch::scalar_tensor(lua_tonumber(L, idx), like.options().requires_grad(false));
  if (!lx_is_tensor(L, idx))
    throw Error(fmt::format("{}: the operand must be a tensor or a number, got {}", fn, lx_type_name(L, idx)));
  return lx_check_tensor(L, idx);
}


int push(lua_State* L, at::Tensor t) {
  lx_push_tensor(L, std::move(t));
  return 1;
}

// A shape is one table: `t:view(2, 3)` (PyTorch's spelling) would read 2 as the shape and drop the 3.
std::vector<int64_t> shape_arg(lua_State* L, int idx, const char* fn, const char* form) {
  if (lua_isnumber(L, idx) && lua_isnumber(L, idx + 1)) {
    std::vector<std::string> sizes;
    for (int i = idx; lua_isnumber(L, i); ++i) sizes.push_back(lua_tostring(L, i));
    throw Error(fmt::format("{}: the shape is one table, {}{{{}}}, got {} separate numbers", fn, form,
                            fmt::join(sizes, ", "), sizes.size()));
  }
  return lx_check_shape(L, idx, fn);
}

// ---- metamethods ----
// A number operand is a Scalar, as in PyTorch: `t / 8` is aten::div(Tensor, Scalar), what C++
// models trace to (so Lua patterns match them), and an int tensor times 0.5 is a float tensor.
// `tensor_tensor(a, b)`, `tensor_scalar(t, c)` (number on the right), `scalar_tensor(c, t)` (left).
std::string operand_text(lua_State* L, int idx) {
  if (lx_is_tensor(L, idx)) return fmt::format("[{}]", fmt::join(lx_check_tensor(L, idx).sizes(), ", "));
  return lua_tostring(L, idx);
}
template <typename TT, typename TS, typename ST>
int binary(lua_State* L, const char* op, TT tensor_tensor, TS tensor_scalar, ST scalar_tensor) {
  for (int i = 1; i <= 2; ++i)
    if (!lua_isnumber(L, i) && !lx_is_tensor(L, i))
      throw Error(fmt::format("Tensor '{}': both sides must be tensors or numbers, got {} on the {}", op,
                              lx_type_name(L, i), i == 1 ? "left" : "right"));
  at::Tensor out;
  try {
    if (lua_isnumber(L, 2)) out = tensor_scalar(lx_check_tensor(L, 1), at::Scalar(lua_tonumber(L, 2)));
    else if (lua_isnumber(L, 1)) out = scalar_tensor(at::Scalar(lua_tonumber(L, 1)), lx_check_tensor(L, 2));
    else out = tensor_tensor(lx_check_tensor(L, 1), lx_check_tensor(L, 2));
  } catch (const c10::Error& e) {  // shapes that do not broadcast: the operator and both operands
    throw Error(fmt::format("Tensor '{}': {} (operands {} and {})", op, e.what_without_backtrace(),
                            operand_text(L, 1), operand_text(L, 2)));
  }
  return push(L, std::move(out));
}
using T = const at::Tensor&;
using S = const at::Scalar&;
int w_Tensor_add(lua_State* L) {
  return binary(L, "+", [](T a, T b) { return a + b; }, [](T t, S c) { return at::add(t, c); },
                [](S c, T t) { return at::add(t, c); });
}
int w_Tensor_sub(lua_State* L) {
  return binary(L, "-", [](T a, T b) { return a - b; }, [](T t, S c) { return at::sub(t, c); },
                [](S c, T t) { return at::rsub(t, c); });
}
int w_Tensor_mul(lua_State* L) {
  return binary(L, "*", [](T a, T b) { return a * b; }, [](T t, S c) { return at::mul(t, c); },
                [](S c, T t) { return at::mul(t, c); });
}
int w_Tensor_div(lua_State* L) {  // c / t as PyTorch's __rtruediv__: reciprocal(t) * c
  return binary(L, "/", [](T a, T b) { return a / b; }, [](T t, S c) { return at::div(t, c); },
                [](S c, T t) { return at::mul(at::reciprocal(t), c); });
}
int w_Tensor_pow(lua_State* L) {
  return binary(L, "^", [](T a, T b) { return at::pow(a, b); }, [](T t, S c) { return at::pow(t, c); },
                [](S c, T t) { return at::pow(c, t); });
}
int w_Tensor_unm(lua_State* L) { return push(L, -lx_check_tensor(L, 1)); }
int w_Tensor_len(lua_State* L) {
  auto& t = lx_check_tensor(L, 1);
  lua_pushnumber(L, t.dim() == 0 ? 0 : static_cast<double>(t.size(0)));
  return 1;
}
int w_Tensor_tostring(lua_State* L) {
  auto& t = lx_check_tensor(L, 1);
  std::ostringstream out;
  if (!t.defined()) out << "Tensor(undefined)";
  else if (t.numel() > 64 || t.device().is_meta())
    out << fmt::format("Tensor[{}, ({})] on {}", tensor_dtype_name(t.scalar_type()), fmt::join(t.sizes(), ", "),
                       t.device().str());
  else out << t;
  lua_pushstring(L, out.str().c_str());
  return 1;
}

// ---- methods ----
int w_Tensor_size(lua_State* L) {
  auto& t = lx_check_tensor(L, 1);
  if (!lua_isnoneornil(L, 2)) {
    lua_pushnumber(L, static_cast<double>(t.size(check_dim(L, 2, t, "Tensor:size"))));
    return 1;
  }
  lua_createtable(L, static_cast<int>(t.dim()), 0);
  for (int64_t i = 0; i < t.dim(); ++i) {
    lua_pushnumber(L, static_cast<double>(t.size(i)));
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}
int w_Tensor_dim(lua_State* L) { lua_pushnumber(L, static_cast<double>(lx_check_tensor(L, 1).dim())); return 1; }
int w_Tensor_numel(lua_State* L) { lua_pushnumber(L, static_cast<double>(lx_check_tensor(L, 1).numel())); return 1; }
int w_Tensor_dtype(lua_State* L) { lua_pushstring(L, tensor_dtype_name(lx_check_tensor(L, 1).scalar_type()).c_str()); return 1; }
int w_Tensor_device(lua_State* L) { lua_pushstring(L, lx_check_tensor(L, 1).device().str().c_str()); return 1; }
int w_Tensor_matmul(lua_State* L) { return push(L, at::matmul(lx_check_tensor(L, 1), lx_check_tensor(L, 2))); }
int w_Tensor_sum(lua_State* L) {
  auto& t = lx_check_tensor(L, 1);
  if (lua_isnoneornil(L, 2)) return push(L, t.sum());
  return push(L, t.sum(check_dim(L, 2, t, "Tensor:sum"), lx_check_opt_boolean(L, 3, false, "Tensor:sum", "keepdim")));
}
int w_Tensor_mean(lua_State* L) {
  auto& t = lx_check_tensor(L, 1);
  if (lua_isnoneornil(L, 2)) return push(L, t.mean());
  return push(L, t.mean(check_dim(L, 2, t, "Tensor:mean"), lx_check_opt_boolean(L, 3, false, "Tensor:mean", "keepdim")));
}
int w_Tensor_abs(lua_State* L) { return push(L, lx_check_tensor(L, 1).abs()); }
int w_Tensor_exp(lua_State* L) { return push(L, lx_check_tensor(L, 1).exp()); }
int w_Tensor_sqrt(lua_State* L) { return push(L, lx_check_tensor(L, 1).sqrt()); }
int w_Tensor_max(lua_State* L) { return push(L, lx_check_tensor(L, 1).max()); }
int w_Tensor_min(lua_State* L) { return push(L, lx_check_tensor(L, 1).min()); }
int w_Tensor_item(lua_State* L) {
  auto& t = lx_check_tensor(L, 1);
  refuse_value_read_while_tracing("Tensor:item()");
  if (t.numel() != 1)
    luaL_error(L, "Tensor:item: the tensor has %d elements; item() needs exactly one", static_cast<int>(t.numel()));
  if (t.scalar_type() == at::kBool) lua_pushboolean(L, t.item<bool>());
  else lua_pushnumber(L, t.item<double>());
  return 1;
}
int w_Tensor_view(lua_State* L) { return push(L, lx_check_tensor(L, 1).view(shape_arg(L, 2, "Tensor:view", "t:view"))); }
int w_Tensor_reshape(lua_State* L) {
  return push(L, lx_check_tensor(L, 1).reshape(shape_arg(L, 2, "Tensor:reshape", "t:reshape")));
}
int w_Tensor_narrow(lua_State* L) {
  auto& t = lx_check_tensor(L, 1);
  int64_t d = check_dim(L, 2, t, "Tensor:narrow");
  int64_t start = lx_check_integer_value(luaL_checknumber(L, 3), "start", -9.0e15, 9.0e15, "Tensor:narrow");
  int64_t len = lx_check_integer_value(luaL_checknumber(L, 4), "length", -9.0e15, 9.0e15, "Tensor:narrow");
  if (start < 0 || len < 0 || start + len > t.size(d))
    luaL_error(L, "Tensor:narrow: [%d, %d) is outside dim %d of size %d", static_cast<int>(start),
               static_cast<int>(start + len), static_cast<int>(d), static_cast<int>(t.size(d)));
  return push(L, t.narrow(d, start, len));
}
int w_Tensor_transpose(lua_State* L) {
  auto& t = lx_check_tensor(L, 1);
  return push(L, t.transpose(check_dim(L, 2, t, "Tensor:transpose"), check_dim(L, 3, t, "Tensor:transpose")));
}
// t:permute({0, 2, 1, 3}): every dim once, in the new order
int w_Tensor_permute(lua_State* L) {
  auto& t = lx_check_tensor(L, 1);
  auto dims = lx_check_shape(L, 2, "Tensor:permute");
  std::vector<bool> seen(static_cast<size_t>(t.dim()), false);
  bool valid = static_cast<int64_t>(dims.size()) == t.dim();
  for (auto& d : dims) {
    if (d < 0) d += t.dim();
    valid = valid && d >= 0 && d < t.dim() && !seen[static_cast<size_t>(d)];
    if (valid) seen[static_cast<size_t>(d)] = true;
  }
  if (!valid)
    luaL_error(L, "Tensor:permute: expected each of the %d dims once, got %s", static_cast<int>(t.dim()),
               fmt::format("{{{}}}", fmt::join(lx_check_shape(L, 2, "Tensor:permute"), ", ")).c_str());
  return push(L, t.permute(dims));
}
int w_Tensor_t(lua_State* L) { return push(L, lx_check_tensor(L, 1).t()); }
int w_Tensor_contiguous(lua_State* L) { return push(L, lx_check_tensor(L, 1).contiguous()); }
int w_Tensor_clone(lua_State* L) { return push(L, lx_check_tensor(L, 1).clone()); }
int w_Tensor_detach(lua_State* L) { return push(L, lx_check_tensor(L, 1).detach()); }
int w_Tensor_requires_grad(lua_State* L) {
  auto& t = lx_check_tensor(L, 1);
  if (lua_isnone(L, 2)) {
    lua_pushboolean(L, t.requires_grad());
    return 1;
  }
  t.requires_grad_(lx_check_opt_boolean(L, 2, true, "Tensor:requires_grad", "the flag"));
  lua_settop(L, 1);
  return 1;
}
int w_Tensor_backward(lua_State* L) {
  auto& t = lx_check_tensor(L, 1);
  if (lua_isnoneornil(L, 2) && t.numel() != 1)
    luaL_error(L, "Tensor:backward: a tensor of %d elements needs a gradient argument; only scalars default to 1",
               static_cast<int>(t.numel()));
  at::Tensor grad = lua_isnoneornil(L, 2) ? at::Tensor() : lx_check_tensor(L, 2);
  run_backward([&] { grad.defined() ? t.backward(grad) : t.backward(); });
  tensor_gc_after_backward(L);
  return 0;
}
int w_Tensor_zero_grad(lua_State* L) {
  auto& t = lx_check_tensor(L, 1);
  if (t.grad().defined()) t.mutable_grad() = at::Tensor();
  return 0;
}
int w_Tensor_to(lua_State* L) {
  auto& t = lx_check_tensor(L, 1);
  constexpr const char* kTargets = "devices: cpu, cuda, cuda:N; dtypes: float32, float64, float16, bfloat16, int64, "
                                   "int32, int8, uint8, bool";
  if (lua_type(L, 2) != LUA_TSTRING)
    throw Error(fmt::format("Tensor:to: the target is a device or dtype name ({}), got {}", kTargets,
                            lx_type_name(L, 2)));
  std::string target = lua_tostring(L, 2);
  for (auto& [name, type] : dtype_names())
    if (name == target) return push(L, t.to(type));
  if (target == "cpu" || target.rfind("cuda", 0) == 0 || target == "meta") {
    lx_check_device_target(L, target, "Tensor:to");
    return push(L, t.to(at::Device(target)));
  }
  throw Error(fmt::format("Tensor:to: unknown target '{}' ({})", target, kTargets));
}
// In-place updates (optimizer-free training loops, gradient averaging); they return the tensor.
int w_Tensor_mul_(lua_State* L) {
  auto& t = lx_check_tensor(L, 1);
  t.mul_(check_operand(L, 2, t, "Tensor:mul_"));
  lua_settop(L, 1);
  return 1;
}
int w_Tensor_add_(lua_State* L) {
  auto& t = lx_check_tensor(L, 1);
  t.add_(check_operand(L, 2, t, "Tensor:add_"), luaL_optnumber(L, 3, 1.0));
  lua_settop(L, 1);
  return 1;
}
int w_Tensor_copy_(lua_State* L) {
  lx_check_tensor(L, 1).copy_(lx_check_tensor(L, 2));
  lua_settop(L, 1);
  return 1;
}
int w_Tensor_zero_(lua_State* L) {
  lx_check_tensor(L, 1).zero_();
  lua_settop(L, 1);
  return 1;
}
int w_Tensor_float(lua_State* L) { return push(L, lx_check_tensor(L, 1).to(at::kFloat)); }
int w_Tensor_double(lua_State* L) { return push(L, lx_check_tensor(L, 1).to(at::kDouble)); }
int w_Tensor_long(lua_State* L) { return push(L, lx_check_tensor(L, 1).to(at::kLong)); }
int w_Tensor_eq(lua_State* L) { auto& t = lx_check_tensor(L, 1); return push(L, t.eq(check_operand(L, 2, t, "Tensor:eq"))); }
int w_Tensor_ne(lua_State* L) { auto& t = lx_check_tensor(L, 1); return push(L, t.ne(check_operand(L, 2, t, "Tensor:ne"))); }
int w_Tensor_lt(lua_State* L) { auto& t = lx_check_tensor(L, 1); return push(L, t.lt(check_operand(L, 2, t, "Tensor:lt"))); }
int w_Tensor_le(lua_State* L) { auto& t = lx_check_tensor(L, 1); return push(L, t.le(check_operand(L, 2, t, "Tensor:le"))); }
int w_Tensor_gt(lua_State* L) { auto& t = lx_check_tensor(L, 1); return push(L, t.gt(check_operand(L, 2, t, "Tensor:gt"))); }
int w_Tensor_ge(lua_State* L) { auto& t = lx_check_tensor(L, 1); return push(L, t.ge(check_operand(L, 2, t, "Tensor:ge"))); }
int w_Tensor_equal(lua_State* L) {
  refuse_value_read_while_tracing("Tensor:equal()");
  lua_pushboolean(L, torch::equal(lx_check_tensor(L, 1), lx_check_tensor(L, 2)));
  return 1;
}
int w_Tensor_tolist(lua_State* L) {
  refuse_value_read_while_tracing("Tensor:tolist()");
  // copied to host memory first: a CUDA tensor's data_ptr is not readable here
  auto t = lx_check_tensor(L, 1).detach().to(at::kCPU, at::kDouble).contiguous().view({-1});
  lua_createtable(L, static_cast<int>(t.numel()), 0);
  auto* data = t.data_ptr<double>();
  for (int64_t i = 0; i < t.numel(); ++i) {
    lua_pushnumber(L, data[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}

// t.grad and other fields that are not methods
int tensor_fields(lua_State* L) {
  auto& t = lx_check_tensor(L, 1);
  const char* key = lua_tostring(L, 2);
  if (key && std::string(key) == "grad") {
    if (t.grad().defined()) lx_push_tensor(L, t.grad());
    else lua_pushnil(L);
    return 1;
  }
  return luaL_error(L, "Tensor: no method or field '%s'", key ? key : luaL_typename(L, 2));
}

const luaL_Reg tensor_methods[] = {
    {"size", w_Tensor_size}, {"dim", w_Tensor_dim}, {"numel", w_Tensor_numel}, {"dtype", w_Tensor_dtype},
    {"device", w_Tensor_device}, {"matmul", w_Tensor_matmul}, {"sum", w_Tensor_sum}, {"mean", w_Tensor_mean},
    {"abs", w_Tensor_abs}, {"exp", w_Tensor_exp}, {"sqrt", w_Tensor_sqrt}, {"max", w_Tensor_max},
    {"min", w_Tensor_min}, {"item", w_Tensor_item}, {"view", w_Tensor_view}, {"reshape", w_Tensor_reshape},
    {"narrow", w_Tensor_narrow}, {"transpose", w_Tensor_transpose}, {"permute", w_Tensor_permute}, {"t", w_Tensor_t},
    {"contiguous", w_Tensor_contiguous}, {"clone", w_Tensor_clone}, {"detach", w_Tensor_detach},
    {"requires_grad", w_Tensor_requires_grad}, {"backward", w_Tensor_backward}, {"zero_grad", w_Tensor_zero_grad},
    {"to", w_Tensor_to}, {"float", w_Tensor_float}, {"double", w_Tensor_double}, {"long", w_Tensor_long},
    {"mul_", w_Tensor_mul_}, {"add_", w_Tensor_add_}, {"copy_", w_Tensor_copy_}, {"zero_", w_Tensor_zero_},
    {"eq", w_Tensor_eq}, {"ne", w_Tensor_ne}, {"lt", w_Tensor_lt}, {"le", w_Tensor_le}, {"gt", w_Tensor_gt},
    {"ge", w_Tensor_ge}, {"equal", w_Tensor_equal}, {"tolist", w_Tensor_tolist}, {nullptr, nullptr}};

const luaL_Reg tensor_meta[] = {
    {"__gc", lx_tensor_gc},   {"__add", w_Tensor_add}, {"__sub", w_Tensor_sub},           {"__mul", w_Tensor_mul},
    {"__div", w_Tensor_div}, {"__pow", w_Tensor_pow}, {"__unm", w_Tensor_unm},           {"__len", w_Tensor_len},
    {"__tostring", w_Tensor_tostring}, {nullptr, nullptr}};

// ---- constructors: slapo.randn{2, 3} ... ----
at::TensorOptions creation_options(lua_State* L, int idx, const char* fn) {
  lx_check_option_keys(L, idx, {"dtype", "device", "requires_grad"}, fn);
  auto dtype = lx_opt_string(L, idx, "dtype", "float32", fn);
  auto opts = at::TensorOptions().dtype(tensor_dtype_from_name(dtype, fn));
  auto device = lx_opt_string(L, idx, "device", "cpu", fn);
  lx_check_device_target(L, device, fn);
  opts = opts.device(at::Device(device));
  return opts.requires_grad(lx_opt_bool(L, idx, "requires_grad", false, fn));
}
// The shape is read before the options: zeros(2, 3) is a slip in the shape, not in the options.
template <typename Make>
int create(lua_State* L, const char* fn, const char* form, Make make) {
  auto shape = shape_arg(L, 1, fn, form);
  return push(L, make(shape, creation_options(L, 2, fn)));
}
using Shape = const std::vector<int64_t>&;
using Options = const at::TensorOptions&;
int w_randn(lua_State* L) { return create(L, "randn", "slapo.randn", [](Shape s, Options o) { return torch::randn(s, o); }); }
int w_rand(lua_State* L) { return create(L, "rand", "slapo.rand", [](Shape s, Options o) { return torch::rand(s, o); }); }
int w_zeros(lua_State* L) { return create(L, "zeros", "slapo.zeros", [](Shape s, Options o) { return torch::zeros(s, o); }); }
int w_ones(lua_State* L) { return create(L, "ones", "slapo.ones", [](Shape s, Options o) { return torch::ones(s, o); }); }
// A whole number argument within +-9e15 (the integers a double holds exactly), else an error
// naming the function and the argument: NaN, fractions and 1e300 would cast to nonsense.
int64_t whole_arg(lua_State* L, int idx, const char* fn, const char* what) {
  return lx_check_integer_value(luaL_checknumber(L, idx), what, -9.0e15, 9.0e15, fn);
}
// arange(end) or arange(start, end): start, start + 1, ..., end - 1 as int64
int w_arange(lua_State* L) {
  lx_check_arg_count(L, 2, "arange", "arange(end) or arange(start, end)");
  bool two = !lua_isnoneornil(L, 2);
  int64_t start = two ? whole_arg(L, 1, "arange", "start") : 0;
  int64_t end = whole_arg(L, two ? 2 : 1, "arange", "end");
  if (end < start)
    throw Error(fmt::format("arange: end ({}) is below start ({}); arange counts up from start to end - 1", end, start));
  return push(L, torch::arange(start, end, at::kLong));
}
int w_randint(lua_State* L) {
  auto lo = whole_arg(L, 1, "randint", "low"), hi = whole_arg(L, 2, "randint", "high");
  if (hi <= lo) throw Error(fmt::format("randint: high ({}) must be greater than low ({})", hi, lo));
  return push(L, torch::randint(lo, hi, lx_check_shape(L, 3, "randint"), at::kLong));
}
void flatten_nested(lua_State* L, int idx, std::vector<double>& values, std::vector<int64_t>& shape, size_t depth) {
  size_t n = lua_objlen(L, idx);
  if (shape.size() == depth) shape.push_back(static_cast<int64_t>(n));
  else if (shape[depth] != static_cast<int64_t>(n)) luaL_error(L, "tensor: ragged nested table (rows of different lengths)");
  bool rows = false;  // a level holds numbers or rows, never both: {1, 2, {3}} has no shape
  for (size_t i = 1; i <= n; ++i) {
    lua_rawgeti(L, idx, static_cast<int>(i));
    bool row = lua_istable(L, -1);
    if (i == 1) rows = row;
    else if (row != rows)
      luaL_error(L, "tensor: entry %d at depth %d is a %s where entry 1 is a %s (every entry of a level is a number, "
                 "or every one a row)", static_cast<int>(i), static_cast<int>(depth) + 1, row ? "row" : "number",
                 rows ? "row" : "number");
    if (row) flatten_nested(L, lua_gettop(L), values, shape, depth + 1);
    else if (lua_isnumber(L, -1)) values.push_back(lua_tonumber(L, -1));
    else luaL_error(L, "tensor: entries must be numbers or tables, got %s", luaL_typename(L, -1));
    lua_pop(L, 1);
  }
}
int w_tensor(lua_State* L) {
  if (lua_isnumber(L, 1)) return push(L, torch::scalar_tensor(lua_tonumber(L, 1), creation_options(L, 2, "tensor")));
  luaL_checktype(L, 1, LUA_TTABLE);
  std::vector<double> values;
  std::vector<int64_t> shape;
  flatten_nested(L, 1, values, shape, 0);
  auto opts = creation_options(L, 2, "tensor");
  auto t = torch::tensor(values, at::kDouble).view(shape).to(opts.dtype()).to(opts.device());
  return push(L, t.requires_grad_(opts.requires_grad()));
}
int w_manual_seed(lua_State* L) {
  // a fraction or NaN would seed some other stream than the one written
  torch::manual_seed(static_cast<uint64_t>(lx_check_integer_value(luaL_checknumber(L, 1), "seed", -9.0e15, 9.0e15,
                                                                  "manual_seed")));
  return 0;
}
int w_cat(lua_State* L) {
  if (!lua_istable(L, 1) || lx_is_tensor(L, 1))
    throw Error(fmt::format("cat: the tensors come as one array, cat({{a, b}}, dim), got {}", lx_type_name(L, 1)));
  std::vector<at::Tensor> parts;
  for (size_t i = 1; i <= lua_objlen(L, 1); ++i) {
    lua_rawgeti(L, 1, static_cast<int>(i));
    parts.push_back(lx_check_tensor(L, -1));
    lua_pop(L, 1);
  }
  return push(L, at::cat(parts, lx_check_integer_value(luaL_optnumber(L, 2, 0), "dim", -64, 63, "cat")));
}
int w_allclose(lua_State* L) {
  refuse_value_read_while_tracing("allclose()");
  auto& a = lx_check_tensor(L, 1);
  auto& b = lx_check_tensor(L, 2);
  lx_check_option_keys(L, 3, {"rtol", "atol"}, "allclose");
  double rtol = lx_opt_number(L, 3, "rtol", 1e-5, "allclose"), atol = lx_opt_number(L, 3, "atol", 1e-8, "allclose");
  if (a.sizes() != b.sizes())
    luaL_error(L, "allclose: shapes differ: (%s) vs (%s)", fmt::format("{}", fmt::join(a.sizes(), ", ")).c_str(),
               fmt::format("{}", fmt::join(b.sizes(), ", ")).c_str());
  lua_pushboolean(L, at::allclose(a.detach().to(at::kDouble), b.detach().to(at::kDouble), rtol, atol));
  return 1;
}
int w_is_tensor(lua_State* L) {
  lua_pushboolean(L, lx_is_tensor(L, 1));
  return 1;
}
int w_set_num_threads(lua_State* L) {
  at::set_num_threads(static_cast<int>(luaL_checknumber(L, 1)));
  return 0;
}
int w_no_grad(lua_State* L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  torch::NoGradGuard guard;
  lua_settop(L, 1);
  lx_pcall(L, 0, LUA_MULTRET);
  return lua_gettop(L);
}

const luaL_Reg tensor_functions[] = {
    {"randn", w_randn},     {"rand", w_rand},         {"zeros", w_zeros},         {"ones", w_ones},
    {"arange", w_arange},   {"randint", w_randint},   {"tensor", w_tensor},       {"manual_seed", w_manual_seed},
    {"cat", w_cat},         {"allclose", w_allclose}, {"is_tensor", w_is_tensor}, {"set_num_threads", w_set_num_threads},
    {"no_grad", w_no_grad}, {nullptr, nullptr}};

}  // namespace

std::string tensor_dtype_name(at::ScalarType type) {
  for (auto& [name, t] : dtype_names())
    if (t == type) return name;
  return c10::toString(type);
}

at::ScalarType tensor_dtype_from_name(const std::string& name, const char* fn) {
  for (auto& [n, t] : dtype_names())
    if (n == name) return t;
  throw Error(fmt::format("{}: unknown dtype '{}' (choices: float32, float64, float16, bfloat16, int64, int32, "
                          "int8, uint8, bool)", fn, name));
}

void open_tensor(lua_State* L) {
  lx_new_class(L, "slapo.Tensor", tensor_methods, tensor_meta, tensor_fields);
  lx_set_funcs(L, tensor_functions);
}

}  // namespace slapo
