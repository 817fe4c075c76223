// slapo.core._plan(model, {cluster =, batch =, seq =, steps =, dtype =, max_stages =, pick =, layer_costs =, pin =}):
// the planner's record (lua/plan_record.h), which slapo.plan in stdlib/slapo/init.lua turns into
// its result and its script; _autoshard(sch, {...}): the intra-op pass's layout record.
#include <cmath>

#include "core/data_dirs.h"
#include "core/error.h"
#include "core/schedule.h"
#include "distributed/group.h"
#include "lua/plan_record.h"
#include "lua/runtime.h"
#include "lua/wrap.h"
#include "models/zoo.h"
#include "plan/intra_op.h"
#include "plan/selection_ilp.h"
#include "plan/planner.h"
#include "primitives/primitives.h"

namespace slapo {

namespace {

int w_plan(lua_State* L) {
  const char* fn = "plan";
  plan::PlanRequest request;
  if (lua_type(L, 1) == LUA_TSTRING) {
    request.model = lua_tostring(L, 1);
  } else if (lx_is_module(L, 1)) {
    const ModelConfig* c = model_config(*lx_check_module(L, 1));
    if (!c) throw Error("plan: the module is not a zoo model (no config); give a preset name or a zoo model");
    request.config = *c;
    request.model = c->model_type();
  } else {
    throw Error(fmt::format("plan: expected a preset name, a Hugging Face directory or a zoo model, got {}", luaL_typename(L, 1)));
  }
  lx_check_option_keys(L, 2, {"cluster", "batch", "seq", "documents", "steps", "dtype", "max_stages", "pick",
                              "layer_costs", "pin"}, fn);
  request.cluster = lx_opt_string(L, 2, "cluster", "1x1:cpu", fn);
  request.work.batch = lx_check_integer_value(lx_opt_number(L, 2, "batch", 8, fn), "batch", 1, 1 << 30, fn);
  request.work.seq = lx_check_integer_value(lx_opt_number(L, 2, "seq", 128, fn), "seq", 1, 1 << 24, fn);
  request.work.documents = lx_check_integer_value(lx_opt_number(L, 2, "documents", 0, fn), "documents", 0, 1 << 24, fn);
  int steps = static_cast<int>(lx_check_integer_value(lx_opt_number(L, 2, "steps", 3, fn), "steps", 1, 1 << 30, fn));
  request.work.dtype = lx_opt_string(L, 2, "dtype", "float32", fn);
  request.search.max_stages = static_cast<int>(
      lx_check_integer_value(lx_opt_number(L, 2, "max_stages", 0, fn), "max_stages", 0, 1 << 20, fn));
  request.layer_costs = lx_opt_string(L, 2, "layer_costs", "ilp", fn);
  request.pick = lx_opt_string(L, 2, "pick", "", fn);
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "pin");
    request.pins = read_plan_pins(L, lua_gettop(L));
    lua_pop(L, 1);
  }
  push_plan_record(L, plan::make_plan(request), steps);
  return 1;
}

// _autoshard(sch, {ranks =, dp =, cluster =, batch =, seq =, memory_mib =, zero =, solver =, sequence =,
// objective =, inputs = {...}}) -> the layout record (push_layer_layout); slapo.autoshard in init.lua
// adds its source
int w_autoshard(lua_State* L) {
  const char* fn = "autoshard";
  auto sch = lx_check_live_schedule(L, 1, fn);
  lx_check_option_keys(L, 2,
                       {"ranks", "dp", "cluster", "batch", "seq", "memory_mib", "zero", "solver", "inputs", "sequence",
                        "objective"}, fn);
  int ranks = static_cast<int>(lx_check_integer_value(lx_opt_number(L, 2, "ranks", sch->group()->size() > 1 ?
                                                                                     sch->group()->size() : 2, fn),
                                                        "ranks", 2, 4096, fn));
  int dp = static_cast<int>(lx_check_integer_value(lx_opt_number(L, 2, "dp", 1, fn), "dp", 1, 65536, fn));
  auto cluster = plan::Cluster::parse(lx_opt_string(L, 2, "cluster", fmt::format("1x{}:h100", ranks * dp), fn),
                                      devices_dir());
  // the device's throughput on a large matmul of its first profiled dtype
  plan::IntraOpOptions o = plan::intra_op_options(cluster, ranks, dp, cluster.device.matmul.front().dtype);
  double batch = lx_opt_number_in(L, 2, "batch", 8, 1, 1e9, fn), seq = lx_opt_number_in(L, 2, "seq", 512, 1, 1e9, fn);
  o.tokens = batch * seq;  // every tensor scaled by tokens alone: the user's example's sequence
                           // length may equal a head's width, which the planner's prime length avoids
  const std::string where = fmt::format("{}: {}", fn, sch->where());  // the choices' errors name the module
  o.solver = lx_opt_choice(L, 2, "solver", {"ilp", "exhaustive"}, 0, where.c_str()) == 0 ? plan::Solver::Ilp
                                                                                       : plan::Solver::Exhaustive;
  o.objective = lx_opt_choice(L, 2, "objective", {"time", "volume"}, 0, where.c_str()) == 0
                    ? plan::Objective::Time
                    : plan::Objective::Volume;
  double memory_mib = lx_opt_number_in(L, 2, "memory_mib", 0, 0, 1e12, fn);
  if (memory_mib > 0) o.memory_bytes = memory_mib * double(1 << 20);
  // zero = true | false | "auto" (the solver chooses)
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "zero");
    bool flag = lua_isboolean(L, -1), on = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (flag) {
      o.zero = on ? plan::ZeroChoice::On : plan::ZeroChoice::Off;
    } else if (std::string zero = lx_opt_string(L, 2, "zero", "auto", fn); zero != "auto") {
      throw Error(fmt::format("{}: option 'zero' must be true, false or \"auto\", got \"{}\"", where, zero));
    }
    // sequence = true: sequence parallelism (the module's tokens split over the ranks)
    o.sequence = lx_opt_bool(L, 2, "sequence", false, fn);
  }
  // example inputs: given, else shaped like the module's last call (its leading tensors)
  Values examples;
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "inputs");
    if (lua_istable(L, -1))
      for (size_t i = 1; i <= lua_objlen(L, -1); ++i) {
        lua_rawgeti(L, -1, static_cast<int>(i));
        examples.emplace_back(lx_check_tensor(L, -1));
        lua_pop(L, 1);
      }
    lua_pop(L, 1);
  }
  if (examples.empty()) examples = examples_like_last_call(*sch->mod(), sch->where(), fn, "{inputs = {x, ...}}");
  push_layer_layout(L, plan::plan_intra_op(*sch->mod(), sch->where(), examples, o));
  return 1;
}

}  // namespace

void open_plan(lua_State* L) {
  lx_set_func(L, "_plan", w_plan);
  lx_set_func(L, "_autoshard", w_autoshard);
  // which solver autoshard's ILP gets in this build: "cbc", or "exhaustive" (built with -DSLAPO_CBC=OFF)
  lua_pushstring(L, plan::have_ilp_solver() ? "cbc" : "exhaustive");
  lua_setfield(L, -2, "ilp_solver");  // slapo.ilp_solver
}

}  // namespace slapo
