// slapo.optim: torch::optim's SGD and AdamW over a module's parameters.
#include <algorithm>
#include <unordered_set>

#include "core/error.h"
#include "core/expert_groups.h"
#include "distributed/group.h"
#include "distributed/world.h"
#include "lua/runtime.h"
#include "lua/wrap.h"
#include "train/adamw_update.h"
#include "train/optimizer_state.h"
#include "train/zero_adamw.h"

namespace slapo {

namespace {

using OptimizerPtr = std::shared_ptr<torch::optim::Optimizer>;

OptimizerPtr& check_optimizer(lua_State* L, int idx) {
  return *static_cast<OptimizerPtr*>(luaL_checkudata(L, idx, "slapo.Optimizer"));
}

// params: a module or an array of tensors
// (an optimizer over nothing is a slip: the wrong module, or every parameter frozen)
std::vector<at::Tensor> param_list(lua_State* L, int idx, const char* fn) {
  if (lx_is_module(L, idx)) {
    std::vector<at::Tensor> out;
    for (auto& [name, p] : unique_named_parameters(*lx_check_module(L, idx)))
      if (p.requires_grad()) out.push_back(p);
    if (out.empty())
      throw Error(fmt::format("{}: the module ({}) has no parameters that require grad, so nothing to optimize", fn,
                              lx_check_module(L, idx)->type_name()));
    return out;
  }
  if (!lua_istable(L, idx)) throw Error(fmt::format("{}: params must be a module or an array of tensors, got {}", fn, lx_type_name(L, idx)));
  std::vector<at::Tensor> out;
  for (size_t i = 1; i <= lua_objlen(L, idx); ++i) {
    lua_rawgeti(L, idx, static_cast<int>(i));
    out.push_back(lx_check_tensor(L, -1));
    lua_pop(L, 1);
  }
  if (out.empty())
    throw Error(fmt::format("{}: the array of parameters is empty (give a module, or an array of its tensors)", fn));
  return out;
}

int push(lua_State* L, OptimizerPtr opt) {
  void* p = lua_newuserdata(L, sizeof(OptimizerPtr));
  new (p) OptimizerPtr(std::move(opt));
  luaL_getmetatable(L, "slapo.Optimizer");
  lua_setmetatable(L, -2);
  return 1;
}

int w_sgd(lua_State* L) {
  const char* fn = "optim.sgd";
  lx_check_option_keys(L, 2, {"lr", "momentum", "weight_decay"}, fn);
  torch::optim::SGDOptions o(lx_opt_number_in(L, 2, "lr", 1e-2, 0, 1e6, fn));
  o.momentum(lx_opt_number_in(L, 2, "momentum", 0, 0, 1, fn));
  o.weight_decay(lx_opt_number_in(L, 2, "weight_decay", 0, 0, 1e6, fn));
  return push(L, std::make_shared<torch::optim::SGD>(param_list(L, 1, fn), o));
}

int w_adamw(lua_State* L) {
  const char* fn = "optim.adamw";
  lx_check_option_keys(L, 2, {"lr", "weight_decay", "eps", "beta1", "beta2", "impl"}, fn);
  torch::optim::AdamWOptions o(lx_opt_number_in(L, 2, "lr", 1e-3, 0, 1e6, fn));
  o.weight_decay(lx_opt_number_in(L, 2, "weight_decay", 0.01, 0, 1e6, fn));
  o.eps(lx_opt_number_in(L, 2, "eps", 1e-8, 0, 1, fn));
  o.betas({lx_opt_number_in(L, 2, "beta1", 0.9, 0, 0.999999, fn), lx_opt_number_in(L, 2, "beta2", 0.999, 0, 0.999999, fn)});
  auto impl = adamw_impl_from_name(lx_opt_string(L, 2, "impl", "auto", fn), fn);
  return push(L, std::make_shared<MultiTensorAdamW>(param_list(L, 1, fn), o, impl));
}

int w_Optimizer_step(lua_State* L) {
  check_optimizer(L, 1)->step();
  return 0;
}
// Zeroes gradients in place, as LibTorch 1.13 does, but without its detach_(): a gradient that is
// a view of a data-parallel bucket must stay one.
int w_Optimizer_zero_grad(lua_State* L) {
  torch::NoGradGuard no_grad;
  for (auto& group : check_optimizer(L, 1)->param_groups())
    for (auto& p : group.params())
      if (p.grad().defined()) p.mutable_grad().zero_();
  return 0;
}
// opt:lr() / opt:set_lr(x): the learning rate of every parameter group (LR schedules use it).
int w_Optimizer_lr(lua_State* L) {
  auto& groups = check_optimizer(L, 1)->param_groups();
  lua_pushnumber(L, groups.empty() ? 0.0 : groups[0].options().get_lr());
  return 1;
}
int w_Optimizer_set_lr(lua_State* L) {
  double lr = luaL_checknumber(L, 2);
  if (!(lr >= 0)) luaL_error(L, "Optimizer:set_lr: the learning rate must be >= 0, got %f", lr);
  for (auto& group : check_optimizer(L, 1)->param_groups()) group.options().set_lr(lr);
  return 0;
}

// opt:state_tensors(model) -> {name -> tensor}
int w_Optimizer_state_tensors(lua_State* L) {
  lx_push_named_tensors(L, optimizer_state_tensors(*check_optimizer(L, 1), unique_named_parameters(*lx_check_module(L, 2))));
  return 1;
}

// opt:load_state_tensors(model, {name -> tensor})
int w_Optimizer_load_state_tensors(lua_State* L) {
  auto state = lx_check_named_tensors(L, 3, "Optimizer:load_state_tensors");
  load_optimizer_state_tensors(*check_optimizer(L, 1), unique_named_parameters(*lx_check_module(L, 2)), state);
  return 0;
}

int w_Optimizer_gc(lua_State* L) {
  check_optimizer(L, 1).~OptimizerPtr();
  return 0;
}

// ---- ZeRO-1 ----
using ZeroPtr = std::shared_ptr<ZeroAdamW>;
ZeroPtr& check_zero(lua_State* L, int idx) { return *static_cast<ZeroPtr*>(luaL_checkudata(L, idx, "slapo.ZeroOptimizer")); }

std::string rank_list(const std::vector<int>& ranks) { return fmt::format("{{{}}}", fmt::join(ranks, ", ")); }

// The parts a ZeRO optimizer over `params` shards: everything over `group`, except a module's
// experts spread by shard_experts, which every rank holds its own of: they shard over the ranks
// holding the same experts (option expert_group; false when no other rank does).
std::vector<ZeroPart> zero_parts(lua_State* L, std::vector<at::Tensor> params, std::shared_ptr<dist::Group> group,
                                 const char* fn) {
  std::vector<ZeroPart> parts(1);
  parts[0].group = group;
  if (!lx_is_module(L, 1)) {
    parts[0].params = std::move(params);
    return parts;
  }
  auto& model = *lx_check_module(L, 1);
  auto experts = expert_group_by_tensor(model);
  ZeroPart expert_part{{}, nullptr, "zero.experts."};
  for (auto& p : params) (experts.count(p.unsafeGetTensorImpl()) ? expert_part : parts[0]).params.push_back(p);
  if (expert_part.params.empty()) return parts;
  auto [block, block_group] = expert_parallel_blocks(model).front();
  auto spread_group = dist::group_by_id(block_group);
  auto spread = spread_group->ranks();
  const int me = spread[spread_group->rank()];
  if (lua_istable(L, 2)) lua_getfield(L, 2, "expert_group");
  else lua_pushnil(L);
  int idx = lua_gettop(L);
  if (lua_isnil(L, idx))
    throw Error(fmt::format("{}: {} spreads its experts over ranks {} (shard_experts), so each rank holds experts of its "
                            "own: give expert_group = the ranks holding the same experts (layout.expert_dp_group), or "
                            "expert_group = false when no other rank holds them",
                            fn, block, rank_list(spread)));
  if (!(lua_isboolean(L, idx) && !lua_toboolean(L, idx))) {
    expert_part.group = lx_group_arg(L, idx, fmt::format("{}: option 'expert_group'", fn));
    auto holders = expert_part.group->ranks();
    auto inside = group ? group->ranks() : std::vector<int>{};
    for (int r : holders) {
      bool same_block = std::count(spread.begin(), spread.end(), r) && r != me;
      bool replica = std::count(inside.begin(), inside.end(), r) > 0;
      if (same_block || !replica)
        throw Error(fmt::format("{}: expert_group {} holds rank {}, which {} (the experts of {} are spread over ranks "
                                "{}, the replicas are {}): expert_group is the ranks holding this rank's experts, one "
                                "in each expert group (layout.expert_dp_group)",
                                fn, rank_list(holders), r,
                                same_block ? "holds other experts" : "is not one of the data-parallel replicas", block,
                                rank_list(spread), rank_list(inside)));
    }
  }
  lua_pop(L, 1);
  parts.push_back(std::move(expert_part));
  return parts;
}

// optim.zero_adamw(model, {lr=, weight_decay=, eps=, beta1=, beta2=, group=, expert_group=, average=, chunk_mib=})
int w_zero_adamw(lua_State* L) {
  ZeroOptions o;
  const char* fn = "optim.zero_adamw";
  if (lua_istable(L, 2))
    lx_check_option_keys(L, 2, {"lr", "weight_decay", "eps", "beta1", "beta2", "group", "expert_group", "average",
                                "chunk_mib"}, fn);
  o.average = lx_opt_bool(L, 2, "average", true, fn);
  o.lr = lx_opt_number_in(L, 2, "lr", o.lr, 0, 1e6, fn);
  o.weight_decay = lx_opt_number_in(L, 2, "weight_decay", o.weight_decay, 0, 1e6, fn);
  o.eps = lx_opt_number_in(L, 2, "eps", o.eps, 0, 1, fn);
  o.beta1 = lx_opt_number_in(L, 2, "beta1", o.beta1, 0, 0.999999, fn);
  o.beta2 = lx_opt_number_in(L, 2, "beta2", o.beta2, 0, 0.999999, fn);
  o.chunk_bytes = static_cast<int64_t>(
      lx_opt_number_in(L, 2, "chunk_mib", static_cast<double>(kZeroChunkBytes) / (1 << 20), 1.0 / 1024, 1 << 20, fn) *
      (1 << 20));
  std::shared_ptr<dist::Group> group;
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "group");
    group = lx_group_arg(L, lua_gettop(L), fmt::format("{}: option 'group'", fn));
    lua_pop(L, 1);
  } else {
    group = lx_group_arg(L, 3, fmt::format("{}: argument 3 (the group)", fn));
  }
  auto parts = zero_parts(L, param_list(L, 1, fn), group, fn);
  void* p = lua_newuserdata(L, sizeof(ZeroPtr));
  new (p) ZeroPtr(std::make_shared<ZeroAdamW>(std::move(parts), o));
  luaL_getmetatable(L, "slapo.ZeroOptimizer");
  lua_setmetatable(L, -2);
  return 1;
}
int w_Zero_step(lua_State* L) {
  check_zero(L, 1)->step();
  return 0;
}
int w_Zero_zero_grad(lua_State* L) {
  check_zero(L, 1)->zero_grad();
  return 0;
}
int w_Zero_lr(lua_State* L) {
  lua_pushnumber(L, check_zero(L, 1)->lr());
  return 1;
}
int w_Zero_set_lr(lua_State* L) {
  check_zero(L, 1)->set_lr(luaL_checknumber(L, 2));
  return 0;
}
int w_Zero_shard_numel(lua_State* L) {
  lua_pushnumber(L, static_cast<double>(check_zero(L, 1)->shard_numel()));
  return 1;
}
// opt:state_tensors([model]) -> {name = tensor}: this rank's slices (the model is not needed)
int w_Zero_state_tensors(lua_State* L) {
  lx_push_named_tensors(L, check_zero(L, 1)->state_tensors());
  return 1;
}
// opt:load_state_tensors([model,] state)
int w_Zero_load_state_tensors(lua_State* L) {
  int idx = lua_istable(L, 3) ? 3 : 2;
  check_zero(L, 1)->load_state_tensors(lx_check_named_tensors(L, idx, "zero_adamw:load_state_tensors"));
  return 0;
}
int w_Zero_gc(lua_State* L) {
  check_zero(L, 1).~ZeroPtr();
  return 0;
}
const luaL_Reg zero_methods[] = {{"step", w_Zero_step},         {"zero_grad", w_Zero_zero_grad},
                                 {"lr", w_Zero_lr},             {"set_lr", w_Zero_set_lr},
                                 {"shard_numel", w_Zero_shard_numel}, {"state_tensors", w_Zero_state_tensors},
                                 {"load_state_tensors", w_Zero_load_state_tensors},
                                 {nullptr, nullptr}};
const luaL_Reg zero_meta[] = {{"__gc", w_Zero_gc}, {nullptr, nullptr}};

const luaL_Reg optimizer_methods[] = {{"step", w_Optimizer_step},
                                      {"zero_grad", w_Optimizer_zero_grad},
                                      {"lr", w_Optimizer_lr},
                                      {"set_lr", w_Optimizer_set_lr},
                                      {"state_tensors", w_Optimizer_state_tensors},
                                      {"load_state_tensors", w_Optimizer_load_state_tensors},
                                      {nullptr, nullptr}};
const luaL_Reg optimizer_meta[] = {{"__gc", w_Optimizer_gc}, {nullptr, nullptr}};
const luaL_Reg optim_functions[] = {{"sgd", w_sgd}, {"adamw", w_adamw}, {"zero_adamw", w_zero_adamw}, {nullptr, nullptr}};

}  // namespace

void open_optim(lua_State* L) {
  lx_new_class(L, "slapo.Optimizer", optimizer_methods, optimizer_meta, nullptr);
  lx_new_class(L, "slapo.ZeroOptimizer", zero_methods, zero_meta, nullptr);
  lua_newtable(L);
  lx_set_funcs(L, optim_functions);
  add_grad_scaler(L);
  lua_setfield(L, -2, "optim");
}

}  // namespace slapo
