// The openers of the slapo.core Lua module, one per wrap_*.cpp file. Each fills the table on
// top of the stack.
#pragma once

#include <lua.hpp>

#include <string>

#include <c10/core/ScalarType.h>
#include <nlohmann/json.hpp>

#include <memory>

namespace slapo::dist {
class Group;
}

namespace slapo {

class Schedule;

void open_tensor(lua_State* L);      // slapo.randn, ..., and the Tensor class
void open_functional(lua_State* L);  // slapo.F
void open_module(lua_State* L);      // the Module class
void open_nn(lua_State* L);          // slapo.nn layers and Lua-defined modules
void open_nn_vision(lua_State* L);   // slapo.nn.Conv2d, BatchNorm2d, pools; slapo.models.resnet (after open_models)
void open_models(lua_State* L);      // slapo.models, save, load
void open_schedule(lua_State* L);    // create_schedule and the Schedule class
void open_dist(lua_State* L);        // slapo.dist and the Group class
void open_data_parallel(lua_State* L);  // slapo.dist.data_parallel (after open_dist)
void open_optim(lua_State* L);       // slapo.optim (SGD, AdamW)
void add_grad_scaler(lua_State* L);  // slapo.optim.grad_scaler, into the table on top
void open_train(lua_State* L);       // clock, clip_grad_norm, measure_peak_flops, memory_mib
void open_kernels(lua_State* L);     // slapo.kernels (fused CPU kernels)
void open_cuda(lua_State* L);        // slapo.cuda (is_available, device_count, synchronize)
void open_plan(lua_State* L);        // slapo.plan (the planner)
void open_text(lua_State* L);        // slapo.tokenizer
void open_process(lua_State* L);     // run_process, executable, machine, file_hash (the tuner's trials)
/// The slapo.Pipeline at `idx` (a Lua error otherwise).
class Pipeline;
Pipeline& lx_check_pipeline(lua_State* L, int idx);
/// slapo.save of a pipeline (the value at `idx`); false when it is not one.
bool lx_save_if_pipeline(lua_State* L, int idx, const std::string& dir, int64_t max_shard_bytes);
/// Raises naming `fn` when `target` is a CUDA device ("cuda", "cuda:1") and none is usable.
void lx_check_device_target(lua_State* L, const std::string& target, const char* fn);
void open_verify(lua_State* L);      // slapo.build and the core of slapo.verify
void open_pipeline(lua_State* L);    // the Pipeline class slapo.build returns for cut stages

/// Pushes the pipeline a schedule with cut stages builds into; `opts` is build's options index.
void lx_push_pipeline(lua_State* L, std::shared_ptr<Schedule> root, int opts);

/// Opens everything as package.loaded["slapo.core"].
int luaopen_slapo_core(lua_State* L);

/// The group at `idx` (a slapo.Group), or the world when the argument is absent; `what` names it
/// in the error ("create_schedule: option 'group'").
std::shared_ptr<dist::Group> lx_group_arg(lua_State* L, int idx, const std::string& what);
/// Pushes a slapo.Group (nil for a null group).
void lx_push_group(lua_State* L, std::shared_ptr<dist::Group> group);

/// A JSON value as a Lua value: objects as tables with string keys, arrays as sequences, null as nil.
void lx_push_json(lua_State* L, const nlohmann::json& j);

std::string tensor_dtype_name(at::ScalarType type);
at::ScalarType tensor_dtype_from_name(const std::string& name, const char* fn);

}  // namespace slapo
