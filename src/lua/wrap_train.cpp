// The C++ pieces of slapo.train: clock, gradient clipping, peak FLOP/s, memory.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <initializer_list>
#include <ATen/CPUGeneratorImpl.h>

#include <map>
#include <unordered_set>

#include <fmt/format.h>

#include "core/error.h"
#include "lua/runtime.h"
#include "lua/tensor_gc.h"
#include "lua/wrap.h"

#include "io/checksum.h"
#include "io/safetensors.h"
#include "io/sharded_checkpoint.h"
#include "primitives/pipeline.h"
#include "primitives/rng.h"
#include "train/autocast.h"
#include "train/tensor_memory.h"
#include "train/train_utils.h"

namespace slapo {

namespace {

int w_clock(lua_State* L) {
  lua_pushnumber(L, std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count());
  return 1;
}

// A pipeline's share of the norm on this rank: its stages' parameters, over the pipeline's ranks.
// On stage meshes every rank of a mesh holds its stage's whole sum (its tp slices summed over the
// tp group, its replicas' gradients combined), so each counts 1 / the mesh's ranks of it.
GradNormPart pipeline_part(const Pipeline& pipe) {
  GradNormPart part;
  auto& meshes = pipe.runner().meshes();
  if (!meshes.empty()) part.share = 1.0 / meshes.at(pipe.runner().stage()).size();
  std::vector<at::Tensor> params;
  try {  // known after a step, or prepare
    params = pipe.parameters();
  } catch (const Error& e) {
    throw Error(fmt::format("clip_grad_norm: {}", e.what()));
  }
  for (auto& p : params) part.held.insert(p.unsafeGetTensorImpl());
  std::unordered_set<std::string> elsewhere;
  for (auto& name : pipe.shared_counted_elsewhere()) elsewhere.insert(name);
  for (auto& [name, p] : pipe.named_parameters())
    if (elsewhere.count(name)) part.counted_elsewhere.insert(p.unsafeGetTensorImpl());
  part.across = pipe.runner().group();
  return part;
}

// clip_grad_norm(model or pipeline, max_norm [, group]) -> norm before clipping. Each split records
// the group it is summed over; a group argument (once required) is still checked, then not needed.
// A pipeline's ranks all call it: the norm is the whole model's.
int w_clip_grad_norm(lua_State* L) {
  double max_norm = luaL_checknumber(L, 2);
  if (!(max_norm > 0)) luaL_error(L, "clip_grad_norm: max_norm must be positive, got %f", max_norm);
  if (!lua_isnoneornil(L, 3)) lx_group_arg(L, 3, "clip_grad_norm: argument 3 (the group)");
  if (luaL_testudata(L, 1, "slapo.Pipeline")) {
    auto& pipe = lx_check_pipeline(L, 1);
    lua_pushnumber(L, clip_grad_norm(*pipe.module(), max_norm, pipeline_part(pipe)));
    return 1;
  }
  auto& m = lx_check_module(L, 1);
  lua_pushnumber(L, clip_grad_norm(*m, max_norm));
  return 1;
}

// measure_peak_flops([{device = "cpu" | "cuda[:N]", dtype = "float32" | "bfloat16" | ...}]) -> FLOP/s
int w_peak_flops(lua_State* L) {
  const char* fn = "measure_peak_flops";
  lx_check_arg_count(L, 1, fn, "slapo.measure_peak_flops([{device =, dtype =}])");
  lx_check_option_keys(L, 1, {"device", "dtype"}, fn);
  auto device = lx_opt_string(L, 1, "device", "cpu", fn);
  lx_check_device_target(L, device, fn);
  if (device.rfind("meta", 0) == 0) return luaL_error(L, "%s: the meta device runs nothing to time (devices: cpu, cuda, cuda:N)", fn);
  auto dtype = tensor_dtype_from_name(lx_opt_string(L, 1, "dtype", "float32", fn), fn);
  lua_pushnumber(L, measure_peak_flops(at::Device(device), dtype));
  return 1;
}

// save_tensors(path, {name -> tensor}, {key -> string}): one safetensors file, written atomically
int w_save_tensors(lua_State* L) {
  std::string path = luaL_checkstring(L, 1);
  NamedTensors tensors = lx_check_named_tensors(L, 2, "save_tensors");
  std::sort(tensors.begin(), tensors.end(), [](auto& a, auto& b) { return a.first < b.first; });
  std::map<std::string, std::string> meta;
  if (!lua_isnoneornil(L, 3) && !lua_istable(L, 3))
    throw Error(fmt::format("save_tensors: the metadata must be a table of strings {{key = \"value\"}}, got {}",
                            luaL_typename(L, 3)));
  if (lua_istable(L, 3)) {
    lua_pushnil(L);
    while (lua_next(L, 3)) {
      meta[luaL_checkstring(L, -2)] = luaL_checkstring(L, -1);
      lua_pop(L, 1);
    }
  }
  write_safetensors(path, tensors, meta, "save_tensors");
  return 0;
}

// load_tensors(path) -> {name -> tensor}, {key -> string}
int w_load_tensors(lua_State* L) {
  if (lua_type(L, 1) != LUA_TSTRING)
    luaL_error(L, "load_tensors: the path must be a string (a .safetensors file), got %s", luaL_typename(L, 1));
  TensorFile file;
  try {
    file = read_safetensors(lua_tostring(L, 1));
  } catch (const Error& e) {
    throw Error(fmt::format("load_tensors: {}", e.what()));
  }
  lx_push_named_tensors(L, file.tensors);
  lua_newtable(L);
  for (auto& [k, v] : file.metadata) {
    lua_pushstring(L, v.c_str());
    lua_setfield(L, -2, k.c_str());
  }
  return 2;
}

// _write_pieces(model, path, {name -> tensor}): this rank's tensors as pieces that reshard
// (io/sharded_checkpoint.h); checkpoint.lua's save
int w_write_pieces(lua_State* L) {
  auto& model = lx_check_module(L, 1);
  std::string path = luaL_checkstring(L, 2);
  NamedTensors tensors = lx_check_named_tensors(L, 3, "checkpoint");
  std::sort(tensors.begin(), tensors.end(), [](auto& a, auto& b) { return a.first < b.first; });
  write_pieces(*model, path, tensors);
  return 0;
}

// _write_piece_index(dir, {file, ...}): dir/index.json from the files' piece lists
int w_write_piece_index(lua_State* L) {
  std::string dir = luaL_checkstring(L, 1);
  luaL_checktype(L, 2, LUA_TTABLE);
  std::vector<std::string> files;
  for (int i = 1; i <= static_cast<int>(lua_objlen(L, 2)); ++i) {
    lua_rawgeti(L, 2, i);
    files.emplace_back(luaL_checkstring(L, -1));
    lua_pop(L, 1);
  }
  write_piece_index(dir, files);
  return 0;
}

// _crc32_file(path) -> 8 hex digits: the file's CRC-32, which training checkpoints record
int w_crc32_file(lua_State* L) {
  lua_pushstring(L, crc32_of_file(luaL_checkstring(L, 1)).c_str());
  return 1;
}

// _read_pieces(dir, section, model [, {name, ...}]) -> {name -> tensor}: this rank's slices for the
// model's layout; of the named tensors alone (and those named after them) when the names are given
int w_read_pieces(lua_State* L) {
  std::string dir = luaL_checkstring(L, 1), section = luaL_checkstring(L, 2);
  auto& model = lx_check_module(L, 3);
  std::vector<std::string> only;
  if (lua_istable(L, 4))
    for (int i = 1; i <= static_cast<int>(lua_objlen(L, 4)); ++i) {
      lua_rawgeti(L, 4, i);
      only.emplace_back(luaL_checkstring(L, -1));
      lua_pop(L, 1);
    }
  lx_push_named_tensors(L, ShardedCheckpoint(dir).read(section, *model, only));
  return 1;
}

// _rng_stream(key) -> its state or nil; _set_rng_stream(key, state or nil); _rng_stream_keys(prefix)
// -> {key, ...}: slapo.random's trackers keep their streams in primitives/rng's named_streams
int w_rng_stream(lua_State* L) {
  auto& streams = named_streams();
  auto found = streams.find(luaL_checkstring(L, 1));
  if (found == streams.end()) lua_pushnil(L);
  else lx_push_value(L, found->second);
  return 1;
}

int w_set_rng_stream(lua_State* L) {
  std::string key = luaL_checkstring(L, 1);
  if (lua_isnoneornil(L, 2)) named_streams().erase(key);
  else named_streams()[key] = lx_to_value(L, 2);
  return 0;
}

int w_rng_stream_keys(lua_State* L) {
  std::string prefix = luaL_checkstring(L, 1);
  lua_newtable(L);
  int i = 0;
  for (auto& [key, state] : named_streams())
    if (key.rfind(prefix, 0) == 0) {
      lua_pushstring(L, key.c_str());
      lua_rawseti(L, -2, ++i);
    }
  return 1;
}

int w_rng_state(lua_State* L) {
  lx_push_tensor(L, cpu_rng_state().clone());
  return 1;
}

// initial_seed() -> the seed the default CPU generator was last seeded with
int w_initial_seed(lua_State* L) {
  lua_pushnumber(L, static_cast<double>(at::detail::getDefaultCPUGenerator().current_seed()));
  return 1;
}

// cuda_rng_states() -> {state, ...}: each CUDA device's default generator (empty without CUDA)
int w_cuda_rng_states(lua_State* L) {
  auto states = cuda_rng_states();
  lua_createtable(L, static_cast<int>(states.size()), 0);
  for (size_t d = 0; d < states.size(); ++d) {
    lx_push_tensor(L, states[d]);
    lua_rawseti(L, -2, static_cast<int>(d + 1));
  }
  return 1;
}

// set_cuda_rng_states({state, ...})
int w_set_cuda_rng_states(lua_State* L) {
  luaL_checktype(L, 1, LUA_TTABLE);
  std::vector<at::Tensor> states;
  for (size_t d = 1; d <= lua_objlen(L, 1); ++d) {
    lua_rawgeti(L, 1, static_cast<int>(d));
    states.push_back(lx_check_tensor(L, -1));
    lua_pop(L, 1);
  }
  set_cuda_rng_states(states);
  return 0;
}

int w_set_rng_state(lua_State* L) {
  set_cpu_rng_state(lx_check_tensor(L, 1));
  return 0;
}

// autocast(dtype, fn, ...): runs fn under autocast ("bf16" | "fp16"): CUDA autocast when a GPU
// is usable, CPU autocast for bf16 (matmuls and linears in the low dtype; reductions and losses
// stay float32), then restores the previous modes, also when fn raises.
int w_autocast(lua_State* L) {
  auto dtype = autocast_dtype_from_name(luaL_checkstring(L, 1), "autocast");
  luaL_checktype(L, 2, LUA_TFUNCTION);
  {
    AutocastScope scope(dtype, "autocast");
    lx_pcall(L, lua_gettop(L) - 2, LUA_MULTRET);
  }
  return lua_gettop(L) - 1;
}

// Runs fn(...) (at 1, its arguments after) metered; leaves the MiB asked for, then fn's results.
int metered_call(lua_State* L, int64_t TensorBytes::*which) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  TensorBytes bytes = tensor_bytes([&] { lx_pcall(L, lua_gettop(L) - 1, LUA_MULTRET); });
  lua_pushnumber(L, static_cast<double>(bytes.*which) / (1 << 20));
  lua_insert(L, 1);
  return lua_gettop(L);
}

// peak_tensor_mib(fn, ...) -> the most MiB of tensor memory fn's tensors held at once (above the
// start), then fn's results
int w_peak_tensor_mib(lua_State* L) { return metered_call(L, &TensorBytes::peak); }

// held_tensor_mib(fn, ...) -> the MiB of tensor memory fn allocated and still holds when it returns
// (what a forward pass keeps for backward, say), then fn's results
int w_held_tensor_mib(lua_State* L) { return metered_call(L, &TensorBytes::held); }

// A table of byte counts in MiB, by field name.
void push_mib_fields(lua_State* L, std::initializer_list<std::pair<const char*, int64_t>> fields) {
  lua_createtable(L, 0, static_cast<int>(fields.size()));
  for (auto& [name, bytes] : fields) {
    lua_pushnumber(L, static_cast<double>(bytes) / (1 << 20));
    lua_setfield(L, -2, name);
  }
}

// tensor_peak(fn, ...) -> {mib, held_mib, gathered_mib, reducing_mib}, then fn's results: the peak
// as peak_tensor_mib, what fn still holds as held_tensor_mib, and of the peak, the whole parameters
// fully_shard had gathered and the gradients its reduce-scatters held (CPU memory)
int w_tensor_peak(lua_State* L) {
  luaL_checktype(L, 1, LUA_TFUNCTION);
  TensorBytes bytes = tensor_bytes([&] { lx_pcall(L, lua_gettop(L) - 1, LUA_MULTRET); });
  push_mib_fields(L, {{"mib", bytes.peak},
                      {"held_mib", bytes.held},
                      {"gathered_mib", bytes.gathered_at_peak},
                      {"reducing_mib", bytes.reducing_at_peak}});
  lua_insert(L, 1);
  return lua_gettop(L);
}

// file_mtime(path) -> modification time in seconds (nanosecond resolution), or nil if absent
int w_file_mtime(lua_State* L) {
  std::error_code ec;
  auto t = std::filesystem::last_write_time(luaL_checkstring(L, 1), ec);
  if (ec) {
    lua_pushnil(L);
    return 1;
  }
  lua_pushnumber(L, std::chrono::duration<double>(t.time_since_epoch()).count());
  return 1;
}

int w_stdout_is_terminal(lua_State* L) {
  lua_pushboolean(L, ::isatty(STDOUT_FILENO));
  return 1;
}

int w_memory_mib(lua_State* L) {
  lua_pushnumber(L, resident_memory_mib());
  return 1;
}

// tensor_gc_stats() -> {boxed_mib, threshold_mib, floor_mib, collections, collect_seconds}: the tensor memory Lua's
// boxes hold and the full collections it caused (lua/tensor_gc.h)
int w_tensor_gc_stats(lua_State* L) {
  auto stats = tensor_gc_stats();
  push_mib_fields(L, {{"boxed_mib", stats.boxed_bytes},
                      {"threshold_mib", stats.threshold_bytes},
                      {"floor_mib", stats.floor_bytes}});
  lua_pushnumber(L, static_cast<double>(stats.collections));
  lua_setfield(L, -2, "collections");
  lua_pushnumber(L, stats.collect_seconds);
  lua_setfield(L, -2, "collect_seconds");
  return 1;
}

const luaL_Reg train_functions[] = {{"tensor_gc_stats", w_tensor_gc_stats},
                                    {"clock", w_clock},
                                    {"clip_grad_norm", w_clip_grad_norm},
                                    {"measure_peak_flops", w_peak_flops},
                                    {"memory_mib", w_memory_mib},
                                    {"peak_tensor_mib", w_peak_tensor_mib},
                                    {"tensor_peak", w_tensor_peak},
                                    {"_stdout_is_terminal", w_stdout_is_terminal},
                                    {"save_tensors", w_save_tensors},
                                    {"_write_pieces", w_write_pieces},
                                    {"_write_piece_index", w_write_piece_index},
                                    {"_crc32_file", w_crc32_file},
                                    {"_read_pieces", w_read_pieces},
                                    {"autocast", w_autocast},
                                    {"_file_mtime", w_file_mtime},
                                    {"load_tensors", w_load_tensors},
                                    {"rng_state", w_rng_state},
                                    {"_rng_stream", w_rng_stream},
                                    {"_set_rng_stream", w_set_rng_stream},
                                    {"_rng_stream_keys", w_rng_stream_keys},
                                    {"set_rng_state", w_set_rng_state},
                                    {"cuda_rng_states", w_cuda_rng_states},
                                    {"held_tensor_mib", w_held_tensor_mib},
                                    {"set_cuda_rng_states", w_set_cuda_rng_states},
                                    {"initial_seed", w_initial_seed},
                                    {nullptr, nullptr}};

}  // namespace

void open_train(lua_State* L) { lx_set_funcs(L, train_functions); }

}  // namespace slapo
