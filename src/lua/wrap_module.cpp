// slapo.Module: handles on modules of any kind (zoo, Lua-defined, TorchScript).
#include <functional>
#include <map>
#include <set>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "core/expert_groups.h"
#include "core/schedule.h"
#include "core/tree_format.h"
#include "distributed/world.h"
#include "lua/runtime.h"
#include "lua/wrap.h"
#include "models/sequence_split.h"
#include "models/zoo.h"

namespace slapo {

namespace {

int w_Module_gc(lua_State* L) {
  using Ptr = std::shared_ptr<Module>;
  lx_check_module(L, 1).~Ptr();
  return 0;
}

int w_Module_call(lua_State* L) {
  auto m = lx_check_module(L, 1);
  Values args;
  for (int i = 2; i <= lua_gettop(L); ++i) args.push_back(lx_to_value(L, i));
  lx_push_value(L, (*m)(std::move(args)));
  return 1;
}

int w_Module_tostring(lua_State* L) {
  lua_pushstring(L, format_tree(*lx_check_module(L, 1)).c_str());
  return 1;
}

int w_Module_eq(lua_State* L) {
  lua_pushboolean(L, lx_is_module(L, 1) && lx_is_module(L, 2) && lx_check_module(L, 1) == lx_check_module(L, 2));
  return 1;
}

// m:num_params([{gathered = true}]) -> the parameters this rank holds, ties once. gathered: those
// fully_shard slices counted whole, as every call computes with them (MFU's count); shard's
// slices count as held, since this rank computes with its slice only.
int w_Module_num_params(lua_State* L) {
  auto& m = lx_check_module(L, 1);
  lx_check_arg_count(L, 1, "num_params", "m:num_params([{gathered = true}])", 1);
  lx_check_option_keys(L, 2, {"gathered"}, "num_params");
  int64_t total = count_unique_parameters(*m);
  if (lx_opt_bool(L, 2, "gathered", false, "num_params")) {
    auto whole = fully_sharded_numels(*m);  // a tie once
    for (auto& p : unique_named_parameters(*m))
      if (auto found = whole.find(p.second.unsafeGetTensorImpl()); found != whole.end())
        total += found->second - p.second.numel();
  }
  lua_pushnumber(L, static_cast<double>(total));
  return 1;
}

int w_Module_type(lua_State* L) {
  lua_pushstring(L, lx_check_module(L, 1)->type_name().c_str());
  return 1;
}

// m:describe() -> the module's settings line ("head_dim=64", "p=0.1"), as the tree shows them
int w_Module_describe(lua_State* L) {
  lua_pushstring(L, lx_check_module(L, 1)->describe().c_str());
  return 1;
}

int w_Module_train(lua_State* L) {
  lx_check_module(L, 1)->train(lua_isnone(L, 2) ? true : lua_toboolean(L, 2));
  lua_settop(L, 1);
  return 1;
}

int w_Module_eval(lua_State* L) {
  lx_check_module(L, 1)->eval();
  lua_settop(L, 1);
  return 1;
}

int w_Module_is_training(lua_State* L) {
  lua_pushboolean(L, lx_check_module(L, 1)->is_training());
  return 1;
}

int w_Module_to(lua_State* L) {
  auto& m = lx_check_module(L, 1);
  std::string target = luaL_checkstring(L, 2);
  if (target == "cpu" || target == "meta" || target.rfind("cuda", 0) == 0) {
    lx_check_device_target(L, target, "Module:to");
    m->to(at::Device(target));
  } else {
    at::ScalarType dtype;
    try {
      dtype = tensor_dtype_from_name(target, "Module:to");
    } catch (const Error& e) {  // neither: say both kinds of target
      throw Error(fmt::format("{} (or a device: cpu, cuda, cuda:N)", e.what()));
    }
    m->to(dtype);
  }
  lua_settop(L, 1);
  return 1;
}

int w_Module_clone(lua_State* L) {
  lx_push_module(L, lx_check_module(L, 1)->deep_clone());
  return 1;
}

int w_Module_parameters(lua_State* L) {
  auto params = unique_named_parameters(*lx_check_module(L, 1));
  lua_createtable(L, static_cast<int>(params.size()), 0);
  for (size_t i = 0; i < params.size(); ++i) {
    lx_push_tensor(L, params[i].second);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}

int w_Module_named_parameters(lua_State* L) {
  auto params = unique_named_parameters(*lx_check_module(L, 1));
  lua_createtable(L, static_cast<int>(2 * params.size()), 0);
  for (size_t i = 0; i < params.size(); ++i) {
    lua_pushstring(L, params[i].first.c_str());
    lua_rawseti(L, -2, static_cast<int>(2 * i + 1));
    lx_push_tensor(L, params[i].second);
    lua_rawseti(L, -2, static_cast<int>(2 * i + 2));
  }
  return lx_push_pairs_iterator(L);
}

void collect_modules(const std::shared_ptr<Module>& m, const std::string& prefix,
                     std::vector<std::pair<std::string, std::shared_ptr<Module>>>& out, bool recurse) {
  for (auto& [name, child] : m->children_in_order()) {
    std::string path = prefix.empty() ? name : prefix + "." + name;
    out.emplace_back(path, child);
    if (recurse) collect_modules(child, path, out, true);
  }
}

int push_module_pairs(lua_State* L, const std::vector<std::pair<std::string, std::shared_ptr<Module>>>& mods) {
  lua_createtable(L, static_cast<int>(2 * mods.size()), 0);
  for (size_t i = 0; i < mods.size(); ++i) {
    lua_pushstring(L, mods[i].first.c_str());
    lua_rawseti(L, -2, static_cast<int>(2 * i + 1));
    lx_push_module(L, mods[i].second);
    lua_rawseti(L, -2, static_cast<int>(2 * i + 2));
  }
  return lx_push_pairs_iterator(L);
}

int w_Module_named_modules(lua_State* L) {
  auto& m = lx_check_module(L, 1);
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> mods{{"", m}};
  collect_modules(m, "", mods, true);
  return push_module_pairs(L, mods);
}

int w_Module_named_children(lua_State* L) {
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> mods;
  collect_modules(lx_check_module(L, 1), "", mods, false);
  return push_module_pairs(L, mods);
}

// rng_states() -> {path = state}: the random stream of each module fork_rng gave one of its own
// (dropout under tensor parallelism), so a training checkpoint can resume it exactly.
int w_Module_rng_states(lua_State* L) {
  auto& m = lx_check_module(L, 1);
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> mods{{"", m}};
  collect_modules(m, "", mods, true);
  lua_newtable(L);
  for (auto& [path, mod] : mods)
    if (mod->meta().rng_state) {
      lx_push_tensor(L, mod->meta().rng_state->clone());
      lua_setfield(L, -2, path.c_str());
    }
  return 1;
}

// fully_sharded_parameters() -> {name, ...}: the parameters fully_shard keeps as 1/N slices (tied
// ones under their first name), in module order. slapo.train leaves their gradients alone:
// fully_shard's backward already averaged them over the group.
int w_Module_fully_sharded_parameters(lua_State* L) {
  auto& m = lx_check_module(L, 1);
  auto fully = fully_sharded_tensors(*m);
  lua_newtable(L);
  int i = 0;
  for (auto& [name, p] : unique_named_parameters(*m))
    if (fully.count(p.unsafeGetTensorImpl())) {
      lua_pushstring(L, name.c_str());
      lua_rawseti(L, -2, ++i);
    }
  return 1;
}

// expert_parallel_parameters() -> {name, ...}: the experts' parameters shard_experts spread over
// ranks, in module order. Each rank holds its own experts, whose gradients the block averaged
// over its group already: slapo.train leaves them out of data-parallel averaging.
int w_Module_expert_parallel_parameters(lua_State* L) {
  auto& m = lx_check_module(L, 1);
  auto experts = expert_group_by_tensor(*m);
  lua_newtable(L);
  int i = 0;
  for (auto& [name, p] : unique_named_parameters(*m))
    if (experts.count(p.unsafeGetTensorImpl())) {
      lua_pushstring(L, name.c_str());
      lua_rawseti(L, -2, ++i);
    }
  return 1;
}

namespace {
// The global ranks of group `id`, as a Lua list on the stack.
void push_ranks(lua_State* L, int id) {
  lua_newtable(L);
  int i = 0;
  for (int r : dist::group_by_id(id)->ranks()) {
    lua_pushinteger(L, r);
    lua_rawseti(L, -2, ++i);
  }
}
}  // namespace

// expert_groups() -> {[block path] = {global rank, ...}}: the group each expert-parallel MoE
// block spreads its experts over, for slapo.train to check against its layout.
int w_Module_expert_groups(lua_State* L) {
  auto& m = lx_check_module(L, 1);
  lua_newtable(L);
  for (auto& [path, id] : expert_parallel_blocks(*m)) {
    push_ranks(L, id);
    lua_setfield(L, -2, path.c_str());
  }
  return 1;
}

// context_parallel_ranks() -> {global rank, ...} or nil: the group context_parallel splits this
// model's sequences over, for slapo.train to check against its layout.
int w_Module_context_parallel_ranks(lua_State* L) {
  auto split = sequence_split_of(*lx_check_module(L, 1));
  if (!split) return 0;
  push_ranks(L, split->group_id());
  return 1;
}

// shard_groups() -> {{global rank, ...}, ...}: the distinct groups `shard` split this model's
// parameters over (tensor parallelism; not fully_shard's), for slapo.train to check its layout.
int w_Module_shard_groups(lua_State* L) {
  auto& m = lx_check_module(L, 1);
  std::set<int> ids;
  std::function<void(const Module&)> visit = [&](const Module& mod) {
    for (auto& [name, spec] : mod.meta().shards)
      if (mod.has_param(name)) ids.insert(spec.group_id);
    for (auto& [name, child] : mod.children_in_order()) visit(*child);
  };
  visit(*m);
  lua_newtable(L);
  int i = 0;
  for (int id : ids) {
    push_ranks(L, id);
    lua_rawseti(L, -2, ++i);
  }
  return 1;
}

// set_rng_states{path = state}: sets those streams; all checked first, so a bad entry sets none.
int w_Module_set_rng_states(lua_State* L) {
  auto& m = lx_check_module(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> mods{{"", m}};
  collect_modules(m, "", mods, true);
  std::map<std::string, std::shared_ptr<at::Tensor>> streams;
  for (auto& [path, mod] : mods)
    if (mod->meta().rng_state) streams[path] = mod->meta().rng_state;
  std::vector<std::pair<std::shared_ptr<at::Tensor>, at::Tensor>> updates;
  lua_pushnil(L);
  while (lua_next(L, 2)) {
    std::string path = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
    auto found = streams.find(path);
    if (lua_type(L, -2) != LUA_TSTRING || found == streams.end()) {
      std::vector<std::string> valid;
      for (auto& s : streams) valid.push_back("'" + s.first + "'");
      throw Error(fmt::format("set_rng_states: no module with a fork_rng stream at {} (valid: {})",
                              lua_type(L, -2) == LUA_TSTRING ? "'" + path + "'" : std::string(luaL_typename(L, -2)),
                              valid.empty() ? std::string("none") : fmt::format("{}", fmt::join(valid, ", "))));
    }
    if (!lx_is_tensor(L, -1))
      throw Error(fmt::format("set_rng_states: the state of '{}' must be a tensor, got {}", path, luaL_typename(L, -1)));
    auto& state = lx_check_tensor(L, -1);
    if (state.sizes() != found->second->sizes() || state.scalar_type() != found->second->scalar_type())
      throw Error(fmt::format("set_rng_states: the state of '{}' is not a CPU generator state ([{}] {}, expected [{}])",
                              path, fmt::join(state.sizes(), ", "), c10::toString(state.scalar_type()),
                              fmt::join(found->second->sizes(), ", ")));
    updates.emplace_back(found->second, state.clone());
    lua_pop(L, 1);
  }
  for (auto& [target, state] : updates) *target = state;
  return 0;
}

// name -> tensor for every parameter name (tied ones under each name) and buffer, as PyTorch.
int w_Module_state_dict(lua_State* L) {
  auto& m = lx_check_module(L, 1);
  lua_newtable(L);
  for (auto& p : m->named_parameters()) {
    if (!p.value().defined()) continue;
    lx_push_tensor(L, p.value().detach());
    lua_setfield(L, -2, p.key().c_str());
  }
  for (auto& b : m->named_buffers()) {
    lx_push_tensor(L, b.value());
    lua_setfield(L, -2, b.key().c_str());
  }
  return 1;
}

int w_Module_load_state_dict(lua_State* L) {
  auto& m = lx_check_module(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  auto params = m->named_parameters();
  auto buffers = m->named_buffers();
  // Check everything first, so a bad entry leaves the module as it was.
  std::vector<std::pair<at::Tensor, at::Tensor>> copies;
  std::vector<std::string> unknown;
  lua_pushnil(L);
  while (lua_next(L, 2)) {
    if (lua_type(L, -2) != LUA_TSTRING)
      throw Error(fmt::format("load_state_dict: keys must be parameter or buffer names (strings), got a {} key",
                              luaL_typename(L, -2)));
    std::string key = lua_tostring(L, -2);
    if (!lx_is_tensor(L, -1))
      throw Error(fmt::format("load_state_dict: the value of '{}' must be a tensor, got {}", key,
                              luaL_typename(L, -1)));
    auto& value = lx_check_tensor(L, -1);
    at::Tensor* target = params.find(key);
    if (!target) target = buffers.find(key);
    if (!target) unknown.push_back(key);
    else if (target->sizes() != value.sizes())
      throw Error(fmt::format("load_state_dict: '{}' has shape [{}] in the module but [{}] in the table", key,
                              fmt::join(target->sizes(), ", "), fmt::join(value.sizes(), ", ")));
    else copies.emplace_back(*target, value);
    lua_pop(L, 1);
  }
  if (!unknown.empty())
    throw Error(fmt::format("load_state_dict: no parameter or buffer named {} in {} (e.g. {})", join_or_none(unknown),
                            m->type_name(), params.size() ? params.keys()[0] : std::string("none")));
  torch::NoGradGuard no_grad;
  for (auto& [target, value] : copies) target.copy_(value);
  return 0;
}

// m.fc (a child), m.weight (a parameter): what a Lua forward reaches through `self`.
int module_fields(lua_State* L) {
  auto& m = lx_check_module(L, 1);
  if (lua_type(L, 2) != LUA_TSTRING)  // h[0] in Lua is a number; the children of a list are named "0", "1", ...
    return luaL_error(L, "%s: index children by name, a string: [\"%s\"] (or :children() for the list), got %s",
                      m->type_name().c_str(), lua_isnumber(L, 2) ? lua_tostring(L, 2) : "name", luaL_typename(L, 2));
  std::string key = lua_tostring(L, 2);
  if (m->has_child(key)) {
    lx_push_module(L, m->child(key));
    return 1;
  }
  if (m->has_param(key)) {
    lx_push_tensor(L, m->param(key));
    return 1;
  }
  auto buffers = m->named_buffers(false);  // find() points into the dict: keep it alive
  if (auto* buffer = buffers.find(key)) {
    lx_push_tensor(L, *buffer);
    return 1;
  }
  std::vector<std::string> names;
  for (auto& [n, c] : m->children_in_order()) names.push_back(n);
  for (auto& n : m->named_parameters(false).keys()) names.push_back(n);
  return luaL_error(L, "%s: no method, child or parameter '%s' (children and parameters: %s)",
                    m->type_name().c_str(), key.c_str(), join_or_none(names).c_str());
}

const luaL_Reg module_methods[] = {
    {"num_params", w_Module_num_params},
    {"type", w_Module_type},
    {"describe", w_Module_describe},
    {"train", w_Module_train},
    {"eval", w_Module_eval},
    {"is_training", w_Module_is_training},
    {"to", w_Module_to},
    {"clone", w_Module_clone},
    {"parameters", w_Module_parameters},
    {"named_parameters", w_Module_named_parameters},
    {"named_modules", w_Module_named_modules},
    {"named_children", w_Module_named_children},
    {"state_dict", w_Module_state_dict},
    {"load_state_dict", w_Module_load_state_dict},
    {"rng_states", w_Module_rng_states},
    {"set_rng_states", w_Module_set_rng_states},
    {"fully_sharded_parameters", w_Module_fully_sharded_parameters},
    {"expert_parallel_parameters", w_Module_expert_parallel_parameters},
    {"expert_groups", w_Module_expert_groups},
    {"shard_groups", w_Module_shard_groups},
    {"context_parallel_ranks", w_Module_context_parallel_ranks},
    {nullptr, nullptr}};
// m.weight = other.weight: the parameter becomes that tensor (a tie, as PyTorch's assignment);
// same shape only, and only for existing parameters (children come through replace).
int w_Module_newindex(lua_State* L) {
  auto& m = lx_check_module(L, 1);
  std::string key = luaL_checkstring(L, 2);
  if (!m->has_param(key))
    throw Error(fmt::format("{}: '{}' is not a parameter; only parameters can be assigned (m.weight = "
                            "other.weight ties them); replace children with sch[...]:replace(...)",
                            m->type_name(), key));
  auto& value = lx_check_tensor(L, 3);
  auto current = m->param(key);
  if (current.sizes() != value.sizes())
    throw Error(fmt::format("{}: cannot assign a [{}] tensor to '{}' of shape [{}]", m->type_name(),
                            fmt::join(value.sizes(), ", "), key, fmt::join(current.sizes(), ", ")));
  m->set_param(key, value);
  return 0;
}

// Every parameter reachable from `m`, tied ones under each of their names, with the pipeline
// stage each belongs to: stages end after modules marked by cut_pipeline_stage (pre-order).
void parameters_by_stage(const std::shared_ptr<Module>& m, const std::string& path, int& stage,
                         std::vector<std::tuple<std::string, const c10::TensorImpl*, int>>& out) {
  for (auto& p : m->named_parameters(/*recurse=*/false))
    if (p.value().defined())
      out.emplace_back(path.empty() ? p.key() : path + "." + p.key(), p.value().unsafeGetTensorImpl(), stage);
  for (auto& [name, child] : m->children_in_order())
    parameters_by_stage(child, path.empty() ? name : path + "." + name, stage, out);
  if (m->meta().ends_stage) ++stage;
}

// analyze_tie_weights(module or schedule) -> {{{"transformer.wte.weight", 0}, {"lm_head.weight", 1}}, ...}:
// each group of parameter names that share one tensor, with the pipeline stage of each name.
int w_analyze_tie_weights(lua_State* L) {
  std::shared_ptr<Module> m = luaL_testudata(L, 1, "slapo.Schedule") ? lx_check_schedule(L, 1)->mod()
                                                                      : lx_check_module(L, 1);
  std::vector<std::tuple<std::string, const c10::TensorImpl*, int>> all;
  int stage = 0;
  parameters_by_stage(m, "", stage, all);
  std::vector<const c10::TensorImpl*> order;
  std::map<const c10::TensorImpl*, std::vector<std::pair<std::string, int>>> by_tensor;
  for (auto& [name, impl, st] : all) {
    if (!by_tensor.count(impl)) order.push_back(impl);
    by_tensor[impl].emplace_back(name, st);
  }
  lua_newtable(L);
  int groups = 0;
  for (auto* impl : order) {
    auto& names = by_tensor[impl];
    if (names.size() < 2) continue;
    lua_createtable(L, static_cast<int>(names.size()), 0);
    for (size_t i = 0; i < names.size(); ++i) {
      lua_createtable(L, 2, 0);
      lua_pushstring(L, names[i].first.c_str());
      lua_rawseti(L, -2, 1);
      lua_pushinteger(L, names[i].second);
      lua_rawseti(L, -2, 2);
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    lua_rawseti(L, -2, ++groups);
  }
  return 1;
}

const luaL_Reg module_meta[] = {{"__gc", w_Module_gc},
                                {"__newindex", w_Module_newindex},
                                {"__call", w_Module_call},
                                {"__tostring", w_Module_tostring},
                                {"__eq", w_Module_eq},
                                {nullptr, nullptr}};

int w_live_modules(lua_State* L) {
  lua_pushnumber(L, static_cast<double>(Module::live_count()));
  return 1;
}

}  // namespace

void open_module(lua_State* L) {
  lx_new_class(L, "slapo.Module", module_methods, module_meta, module_fields);
  lx_set_func(L, "_live_modules", w_live_modules);
  lx_set_func(L, "analyze_tie_weights", w_analyze_tie_weights);
}

}  // namespace slapo
