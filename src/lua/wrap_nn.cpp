// slapo.nn: layer constructors with PyTorch's default initialisation, and Lua-defined modules.
#include <cmath>
#include <map>

#include "core/error.h"
#include "lua/empty_weights.h"
#include "lua/lua_module.h"
#include "lua/runtime.h"
#include "lua/wrap.h"
#include "models/layers.h"

namespace slapo {

namespace {
bool g_empty_weights = false;
}  // namespace

bool lx_empty_weights() { return g_empty_weights; }
void lx_set_empty_weights(bool on) { g_empty_weights = on; }

namespace {

// Layers made inside init_empty_weights live on the meta device and skip their initialisation.
at::TensorOptions layer_options() { return g_empty_weights ? at::TensorOptions().device(at::kMeta) : at::TensorOptions(); }

int64_t check_size(lua_State* L, int idx, const char* fn, const char* what) {
  double n = luaL_checknumber(L, idx);
  if (n < 1 || std::floor(n) != n) luaL_error(L, "%s: %s must be a positive integer, got %g", fn, what, n);
  return static_cast<int64_t>(n);
}

int push(lua_State* L, std::shared_ptr<Module> m) {
  lx_push_module(L, std::move(m));
  return 1;
}

// torch.nn.Linear's reset_parameters: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias.
int w_nn_Linear(lua_State* L) {
  int64_t in = check_size(L, 1, "nn.Linear", "in_features"), out = check_size(L, 2, "nn.Linear", "out_features");
  lx_check_option_keys(L, 3, {"bias"}, "nn.Linear");
  auto m = std::make_shared<Linear>(in, out, lx_opt_bool(L, 3, "bias", true, "nn.Linear"), layer_options());
  if (g_empty_weights) return push(L, m);
  torch::NoGradGuard no_grad;
  double bound = 1.0 / std::sqrt(static_cast<double>(in));
  m->param("weight").uniform_(-bound, bound);
  if (m->has_param("bias")) m->param("bias").uniform_(-bound, bound);
  return push(L, m);
}

int w_nn_LayerNorm(lua_State* L) {
  lx_check_option_keys(L, 2, {"eps"}, "nn.LayerNorm");
  if (!(lx_opt_number(L, 2, "eps", 1e-5, "nn.LayerNorm") > 0))
    throw Error(fmt::format("nn.LayerNorm: eps must be positive, got {}", lx_opt_number(L, 2, "eps", 1e-5, "nn.LayerNorm")));
  auto m = std::make_shared<LayerNorm>(check_size(L, 1, "nn.LayerNorm", "normalized_shape"),
                                       lx_opt_number(L, 2, "eps", 1e-5, "nn.LayerNorm"), layer_options());
  if (g_empty_weights) return push(L, m);
  torch::NoGradGuard no_grad;
  m->param("weight").fill_(1.0);
  m->param("bias").zero_();
  return push(L, m);
}

int w_nn_RMSNorm(lua_State* L) {
  lx_check_option_keys(L, 2, {"eps"}, "nn.RMSNorm");
  if (!(lx_opt_number(L, 2, "eps", 1e-6, "nn.RMSNorm") > 0))
    throw Error(fmt::format("nn.RMSNorm: eps must be positive, got {}", lx_opt_number(L, 2, "eps", 1e-6, "nn.RMSNorm")));
  auto m = std::make_shared<RMSNorm>(check_size(L, 1, "nn.RMSNorm", "hidden_size"),
                                     lx_opt_number(L, 2, "eps", 1e-6, "nn.RMSNorm"), layer_options());
  if (g_empty_weights) return push(L, m);
  torch::NoGradGuard no_grad;
  m->param("weight").fill_(1.0);
  return push(L, m);
}

int w_nn_Embedding(lua_State* L) {
  c10::optional<int64_t> pad;
  int64_t rows = check_size(L, 1, "nn.Embedding", "num_embeddings"), dim = check_size(L, 2, "nn.Embedding", "embedding_dim");
  lx_check_option_keys(L, 3, {"padding_idx"}, "nn.Embedding");
  double p = lx_opt_number(L, 3, "padding_idx", -1, "nn.Embedding");
  if (p != -1) pad = lx_check_integer_value(p, "padding_idx", 0, static_cast<double>(rows - 1), "nn.Embedding");
  auto m = std::make_shared<Embedding>(rows, dim, pad, layer_options());
  if (g_empty_weights) return push(L, m);
  torch::NoGradGuard no_grad;
  m->param("weight").normal_();
  if (pad) m->param("weight")[*pad].zero_();
  return push(L, m);
}

int w_nn_Dropout(lua_State* L) {
  double p = luaL_optnumber(L, 1, 0.5);
  if (p < 0 || p > 1) luaL_error(L, "nn.Dropout: p must be in [0, 1], got %g", p);
  return push(L, std::make_shared<Dropout>(p));
}

// Layers without settings take no arguments: nn.ReLU(5) or nn.ReLU(true) (PyTorch's inplace) is refused.
int w_nn_ReLU(lua_State* L) {
  lx_check_arg_count(L, 0, "nn.ReLU", "nn.ReLU()");
  return push(L, Activation::from_hf_name("relu"));
}
int w_nn_SiLU(lua_State* L) {
  lx_check_arg_count(L, 0, "nn.SiLU", "nn.SiLU()");
  return push(L, Activation::from_hf_name("silu"));
}
int w_nn_Tanh(lua_State* L) {
  lx_check_arg_count(L, 0, "nn.Tanh", "nn.Tanh()");
  return push(L, Activation::from_hf_name("tanh"));
}
int w_nn_GELU(lua_State* L) {
  lx_check_arg_count(L, 1, "nn.GELU", "nn.GELU([{approximate = 'none' or 'tanh'}])");
  std::string approximate = lx_opt_string(L, 1, "approximate", "none", "nn.GELU");
  if (approximate == "none") return push(L, std::make_shared<Activation>("GELU", "gelu"));
  if (approximate == "tanh") return push(L, std::make_shared<Activation>("GELU", "gelu_tanh"));
  return luaL_error(L, "nn.GELU: approximate must be 'none' or 'tanh', got '%s'", approximate.c_str());
}
int w_nn_Identity(lua_State* L) {
  lx_check_arg_count(L, 0, "nn.Identity", "nn.Identity()");
  return push(L, std::make_shared<Identity>());
}

std::vector<std::shared_ptr<Module>> module_array(lua_State* L, int idx, const char* fn) {
  if (!lua_istable(L, idx))  // nn.Sequential(a, b), PyTorch's spelling
    throw Error(fmt::format("{}: the modules come as one array, {}{{a, b, ...}}, got {}", fn, fn, lx_type_name(L, idx)));
  lx_check_arg_count(L, idx, fn, fmt::format("{}{{a, b, ...}}", fn).c_str());
  std::vector<std::shared_ptr<Module>> out;
  for (size_t i = 1; i <= lua_objlen(L, idx); ++i) {
    lua_rawgeti(L, idx, static_cast<int>(i));
    if (!lx_is_module(L, -1))
      throw Error(fmt::format("{}: entry {} must be a module, got {}", fn, i, lx_type_name(L, -1)));
    out.push_back(lx_check_module(L, -1));
    lua_pop(L, 1);
  }
  return out;
}

int w_nn_Sequential(lua_State* L) { return push(L, std::make_shared<Sequential>(module_array(L, 1, "nn.Sequential"))); }
int w_nn_ModuleList(lua_State* L) { return push(L, std::make_shared<ModuleList>(module_array(L, 1, "nn.ModuleList"))); }

// core.lua_module(type_name, children, params, forward): the stdlib's slapo.nn.Module{...} calls it.
// Children and parameters are registered in name order: a Lua table's iteration order may differ
// between processes (LuaJIT seeds its string hashes), and every rank must see the same order, as
// per-parameter collectives (gradient all-reduce, verify's gathers) walk them in it.
int w_nn_lua_module(lua_State* L) {
  std::string type = luaL_checkstring(L, 1);
  auto m = std::make_shared<LuaModule>(L, type, 4);
  if (lua_istable(L, 2)) {
    std::map<std::string, std::shared_ptr<Module>> children;
    lua_pushnil(L);
    while (lua_next(L, 2)) {
      if (lua_type(L, -2) != LUA_TSTRING || !lx_is_module(L, -1))
        throw Error(fmt::format("nn.Module '{}': children must map names to modules, got {} = {}", type,
                                lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "a " + lx_type_name(L, -2) + " key",
                                lx_type_name(L, -1)));
      children[lua_tostring(L, -2)] = lx_check_module(L, -1);
      lua_pop(L, 1);
    }
    for (auto& [name, child] : children) m->set_child(name, child);
  }
  if (lua_istable(L, 3)) {
    std::map<std::string, at::Tensor> params;
    lua_pushnil(L);
    while (lua_next(L, 3)) {
      if (lua_type(L, -2) != LUA_TSTRING || !lx_is_tensor(L, -1))
        throw Error(fmt::format("nn.Module '{}': params must map names to tensors, got {} = {}", type,
                                lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "a " + lx_type_name(L, -2) + " key",
                                lx_type_name(L, -1)));
      auto t = lx_check_tensor(L, -1);
      if (!t.requires_grad() && at::isFloatingType(t.scalar_type())) t = t.detach().requires_grad_(true);
      params[lua_tostring(L, -2)] = t;
      lua_pop(L, 1);
    }
    for (auto& [name, t] : params) m->set_param(name, t);
  }
  return push(L, m);
}

const luaL_Reg nn_functions[] = {
    {"Linear", w_nn_Linear},       {"LayerNorm", w_nn_LayerNorm},   {"RMSNorm", w_nn_RMSNorm},
    {"Embedding", w_nn_Embedding}, {"Dropout", w_nn_Dropout},       {"ReLU", w_nn_ReLU},
    {"GELU", w_nn_GELU},           {"SiLU", w_nn_SiLU},             {"Tanh", w_nn_Tanh},
    {"Identity", w_nn_Identity},   {"Sequential", w_nn_Sequential}, {"ModuleList", w_nn_ModuleList},
    {"lua_module", w_nn_lua_module}, {nullptr, nullptr}};

}  // namespace

void open_nn(lua_State* L) {
  lua_newtable(L);
  lx_set_funcs(L, nn_functions);
  lua_setfield(L, -2, "nn");
}

}  // namespace slapo
