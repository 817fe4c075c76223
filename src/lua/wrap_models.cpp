// slapo.models (zoo, presets, from_pretrained), slapo.save and slapo.load.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/json_file.h"
#include "lua/empty_weights.h"
#include "io/pretrained.h"
#include "io/torchscript.h"
#include "lua/runtime.h"
#include "lua/wrap.h"
#include "models/moe.h"
#include "models/zoo.h"

namespace slapo {

namespace {

// Lua tables may nest without end (t.self = t); JSON documents come limited (io/json_file.h).
// `who` names the caller in errors ("models: config", "write_json"), `path` the value's place.
// NaN and infinities: JSON has none, so files refuse them; json_encode writes null (the tuner's
// rows may carry a diverged loss); a model config keeps them for its own checks, which name the
// model and the field's valid range.
enum class NonFinite { Refuse, Null, Keep };
nlohmann::json table_to_json(lua_State* L, int idx, const char* who, NonFinite non_finite = NonFinite::Refuse,
                             const std::string& path = "", int depth = 0) {
  idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
  const std::string where = path.empty() ? "the value" : "'" + path + "'";
  if (depth > kMaxJsonDepth)
    throw Error(fmt::format("{}: tables nest deeper than {} levels at {} (a table that contains itself?)", who,
                            kMaxJsonDepth, where));
  luaL_checkstack(L, 4, "tables nest too deep");
  auto child = [&](const std::string& key) { return path.empty() ? key : path + "." + key; };
  switch (lua_type(L, idx)) {
    case LUA_TBOOLEAN: return static_cast<bool>(lua_toboolean(L, idx));
    case LUA_TNUMBER: {
      double d = lua_tonumber(L, idx);
      if (!std::isfinite(d) && non_finite == NonFinite::Null) return nullptr;
      if (!std::isfinite(d) && non_finite == NonFinite::Keep) return d;
      if (!std::isfinite(d))  // JSON has no NaN or infinity: it would be written as null
        throw Error(fmt::format("{}: {} is {}, which JSON cannot hold", who, where, d != d ? "NaN" : "infinite"));
      if (std::floor(d) == d && std::fabs(d) < 1e15) return static_cast<int64_t>(d);
      return d;
    }
    case LUA_TSTRING: return std::string(lua_tostring(L, idx));
    case LUA_TTABLE: {
      if (lua_objlen(L, idx) > 0) {
        nlohmann::json arr = nlohmann::json::array();
        for (size_t i = 1; i <= lua_objlen(L, idx); ++i) {
          lua_rawgeti(L, idx, static_cast<int>(i));
          arr.push_back(table_to_json(L, -1, who, non_finite, child(std::to_string(i)), depth + 1));
          lua_pop(L, 1);
        }
        return arr;
      }
      nlohmann::json obj = nlohmann::json::object();
      lua_pushnil(L);
      while (lua_next(L, idx)) {
        if (lua_type(L, -2) != LUA_TSTRING)
          throw Error(fmt::format("{}: keys must be strings, {} has a {} key", who, where, luaL_typename(L, -2)));
        std::string key = lua_tostring(L, -2);
        obj[key] = table_to_json(L, -1, who, non_finite, child(key), depth + 1);
        lua_pop(L, 1);
      }
      return obj;
    }
    case LUA_TNIL: return nullptr;
    default:
      throw Error(fmt::format("{}: {} is a {}; values must be numbers, strings, booleans or tables", who, where,
                              luaL_typename(L, idx)));
  }
}


// {device = "meta" | "cpu" | "cuda", dtype = "float32" | ..., init = true}; `checkpoint_dtype`:
// dtype may also be "auto" (the default), the checkpoint's own.
BuildOptions build_options(lua_State* L, int idx, const char* fn, bool checkpoint_dtype = false) {
  if (checkpoint_dtype) lx_check_option_keys(L, idx, {"device", "dtype"}, fn);
  else lx_check_option_keys(L, idx, {"device", "dtype", "init"}, fn);
  BuildOptions o;
  auto device = lx_opt_string(L, idx, "device", lx_empty_weights() && !checkpoint_dtype ? "meta" : "cpu", fn);
  lx_check_device_target(L, device, fn);
  auto dtype = lx_opt_string(L, idx, "dtype", checkpoint_dtype ? "auto" : "float32", fn);
  o.dtype_from_checkpoint = checkpoint_dtype && dtype == "auto";
  if (o.dtype_from_checkpoint) dtype = "float32";
  o.tensor_options = at::TensorOptions().device(at::Device(device)).dtype(tensor_dtype_from_name(dtype, fn));
  o.init_weights = lx_opt_bool(L, idx, "init", true, fn);
  return o;
}

// The config argument: a preset name or a table of HF config.json fields.
ModelConfig config_arg(lua_State* L, int idx, const std::string& model_type, const char* fn) {
  if (lua_type(L, idx) == LUA_TSTRING) {
    auto c = ModelConfig::preset(lua_tostring(L, idx));
    if (!model_type.empty() && c.model_type() != model_type)
      throw Error(fmt::format("{}: preset '{}' is a {} model, not {}", fn, lua_tostring(L, idx), c.model_type(), model_type));
    return c;
  }
  if (lua_isnoneornil(L, idx)) return ModelConfig(nlohmann::json::object()).with_defaults(model_type);
  if (!lua_istable(L, idx))
    throw Error(fmt::format("{}: expected a preset name or a table of config.json fields, got {}", fn, luaL_typename(L, idx)));
  auto fields = table_to_json(L, idx, "models: config", NonFinite::Keep);
  if (fields.contains("model_type") && fields["model_type"] != model_type && !model_type.empty())
    throw Error(fmt::format("{}: config has model_type '{}'", fn, fields["model_type"].dump()));
  return ModelConfig(fields).with_defaults(model_type.empty() ? fields.value("model_type", "") : model_type);
}

template <std::shared_ptr<Module> (*Build)(const ModelConfig&, const BuildOptions&)>
int build_with(lua_State* L, const char* model_type, const char* fn) {
  auto config = config_arg(L, 1, model_type, fn);
  lx_push_module(L, Build(config, build_options(L, 2, fn)));
  return 1;
}

int w_models_mlp(lua_State* L) { return build_with<build_mlp>(L, "mlp", "models.mlp"); }
int w_models_bert(lua_State* L) { return build_with<build_bert>(L, "bert", "models.bert"); }
int w_models_gpt2(lua_State* L) { return build_with<build_gpt2>(L, "gpt2", "models.gpt2"); }
int w_models_roberta(lua_State* L) { return build_with<build_bert>(L, "roberta", "models.roberta"); }
int w_models_albert(lua_State* L) { return build_with<build_albert>(L, "albert", "models.albert"); }
int w_models_t5(lua_State* L) { return build_with<build_t5>(L, "t5", "models.t5"); }
int w_models_gpt_neo(lua_State* L) { return build_with<build_gpt_neo>(L, "gpt_neo", "models.gpt_neo"); }
int w_models_opt(lua_State* L) { return build_with<build_opt>(L, "opt", "models.opt"); }
int w_models_llama(lua_State* L) { return build_with<build_llama>(L, "llama", "models.llama"); }
int w_models_qwen2(lua_State* L) { return build_with<build_llama>(L, "qwen2", "models.qwen2"); }
int w_models_mistral(lua_State* L) { return build_with<build_llama>(L, "mistral", "models.mistral"); }
int w_models_mixtral(lua_State* L) { return build_with<build_llama>(L, "mixtral", "models.mixtral"); }
// models.expert_compute(model, "auto" | "gathered" | "grouped" | "dense") -> blocks changed: how
// every sparse MoE block below `model` runs its experts (models/moe.h, ExpertCompute).
int w_models_expert_compute(lua_State* L) {
  auto& m = lx_check_module(L, 1);
  std::string mode = luaL_checkstring(L, 2);
  static const std::map<std::string, ExpertCompute> modes = {{"auto", ExpertCompute::kAuto},
                                                             {"gathered", ExpertCompute::kGathered},
                                                             {"grouped", ExpertCompute::kGrouped},
                                                             {"dense", ExpertCompute::kDense}};
  auto found = modes.find(mode);
  if (found == modes.end())
    return luaL_error(L, "models.expert_compute: unknown mode '%s' (choices: auto, gathered, grouped, dense)",
                      mode.c_str());
  std::vector<std::pair<std::string, Module*>> blocks;
  for (auto& item : m->named_modules("", /*include_self=*/true))
    if (auto* block = dynamic_cast<Module*>(item.value().get()); block && is_sparse_moe_block(*block))
      blocks.emplace_back(item.key(), block);
  if (blocks.empty())
    return luaL_error(L, "models.expert_compute: %s holds no sparse MoE block (Mixtral's block_sparse_moe)",
                      m->type_name().c_str());
  for (auto& [path, block] : blocks)  // every block checked before any changes
    if (mode == "dense" && block->meta().expert_group >= 0)
      throw Error(fmt::format("models.expert_compute: '{}' spreads its experts over ranks (shard_experts); \"dense\" "
                              "runs every expert on every token, so it needs them all in this process",
                              path));
  for (auto& [path, block] : blocks) set_expert_compute(*block, found->second);
  lua_pushinteger(L, static_cast<lua_Integer>(blocks.size()));
  return 1;
}

// models.build(preset name or config with model_type, opts)
int w_models_build(lua_State* L) {
  auto config = config_arg(L, 1, "", "models.build");
  lx_push_module(L, build_model(config, build_options(L, 2, "models.build")));
  return 1;
}

int w_models_presets(lua_State* L) {
  auto names = ModelConfig::preset_names();
  lua_createtable(L, static_cast<int>(names.size()), 0);
  for (size_t i = 0; i < names.size(); ++i) {
    lua_pushstring(L, names[i].c_str());
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}

int w_models_config(lua_State* L) {
  const ModelConfig* c = model_config(*lx_check_module(L, 1));
  if (!c) lua_pushnil(L);
  else lx_push_json(L, c->json());
  return 1;
}

// from_pretrained(dir, {device =, dtype = "auto" (the checkpoint's, default) | "float32" | ...});
// device = "meta": shapes now, values read by slapo.build (each rank its own slices)
int w_models_from_pretrained(lua_State* L) {
  const char* fn = "models.from_pretrained";
  auto options = build_options(L, 2, fn, /*checkpoint_dtype=*/true);
  std::string dir = luaL_checkstring(L, 1);
  if (!std::filesystem::is_directory(dir))
    throw Error(fmt::format("{}: '{}' is not a directory (a Hugging Face model directory holds config.json and "
                            "model.safetensors)",
                            fn, dir));
  lx_push_module(L, from_pretrained(dir, options));
  return 1;
}

// save(model, schedule or pipeline, dir, {max_shard_size = bytes}): a schedule's sharded
// parameters, or a pipeline's stages, are gathered into one Hugging Face checkpoint (every rank
// calls it; one writes).
int w_save(lua_State* L) {
  lx_check_option_keys(L, 3, {"max_shard_size"}, "save");
  double shard = lx_opt_number(L, 3, "max_shard_size", 0, "save");
  if (!(shard >= 0) || shard > 9.0e15)
    throw Error(fmt::format("save: max_shard_size must be a byte count >= 0 (0: one file), got {}", shard));
  if (lx_save_if_pipeline(L, 1, luaL_checkstring(L, 2), static_cast<int64_t>(shard))) return 0;
  if (luaL_testudata(L, 1, "slapo.Schedule")) {
    save_consolidated(*lx_check_schedule(L, 1), luaL_checkstring(L, 2), static_cast<int64_t>(shard));
    return 0;
  }
  auto& m = lx_check_module(L, 1);
  save_pretrained(*m, luaL_checkstring(L, 2), static_cast<int64_t>(shard));
  return 0;
}

// read_json(path) -> the file's JSON as Lua values (objects become tables, arrays 1-based)
int w_read_json(lua_State* L) {
  auto j = read_json_file(luaL_checkstring(L, 1), "read_json");
  lx_push_json(L, j);
  return 1;
}

// write_json(path, value): a Lua value as JSON (tables with 1..n become arrays), written whole
// to a temporary name, flushed to disk and renamed (io/atomic_file.h).
int w_write_json(lua_State* L) {
  std::string path = luaL_checkstring(L, 1);
  luaL_checkany(L, 2);
  auto j = table_to_json(L, 2, "write_json");
  write_file_atomically(path, [&](std::ostream& out) { out << j.dump(2) << "\n"; }, "write_json");
  return 0;
}

// json_encode(value) -> one line of JSON; json_decode(text) -> Lua values (the tuner's database)
int w_json_encode(lua_State* L) {
  luaL_checkany(L, 1);
  auto text = table_to_json(L, 1, "json_encode", NonFinite::Null).dump();
  lua_pushlstring(L, text.data(), text.size());
  return 1;
}

int w_json_decode(lua_State* L) {
  std::string text = luaL_checkstring(L, 1);
  nlohmann::json j;
  try {
    j = parse_json_limited(text);
  } catch (const std::exception& e) {
    throw Error(fmt::format("json_decode: not valid JSON: {}", e.what()));
  }
  lx_push_json(L, j);
  return 1;
}

// _closest_names(wanted, {names}) -> the names closest by edit distance ("did you mean" in Lua)
int w_closest_names(lua_State* L) {
  std::string wanted = luaL_checkstring(L, 1);
  auto names = lx_check_strings(L, 2, "_closest_names", "names");
  auto close = closest_names(wanted, names);
  lua_createtable(L, static_cast<int>(close.size()), 0);
  for (size_t i = 0; i < close.size(); ++i) {
    lua_pushstring(L, close[i].c_str());
    lua_rawseti(L, -2, static_cast<int>(i) + 1);
  }
  return 1;
}

// _set_empty_weights(on) -> the previous setting (slapo.init_empty_weights in init.lua)
int w_set_empty_weights(lua_State* L) {
  bool before = lx_empty_weights();
  lx_set_empty_weights(lua_toboolean(L, 1));
  lua_pushboolean(L, before);
  return 1;
}

int w_load(lua_State* L) {
  lx_push_module(L, load_torchscript(luaL_checkstring(L, 1)));
  return 1;
}

const luaL_Reg models_functions[] = {
    {"mlp", w_models_mlp},         {"bert", w_models_bert},       {"gpt2", w_models_gpt2},
    {"roberta", w_models_roberta}, {"albert", w_models_albert}, {"t5", w_models_t5}, {"gpt_neo", w_models_gpt_neo}, {"opt", w_models_opt},
    {"llama", w_models_llama},     {"qwen2", w_models_qwen2},     {"mistral", w_models_mistral}, {"mixtral", w_models_mixtral},
    {"build", w_models_build},     {"presets", w_models_presets}, {"expert_compute", w_models_expert_compute},
    {"config", w_models_config},   {"from_pretrained", w_models_from_pretrained}, {nullptr, nullptr}};

}  // namespace

void lx_push_json(lua_State* L, const nlohmann::json& j) {
  luaL_checkstack(L, 4, "read_json: JSON nests too deep");
  if (j.is_null()) lua_pushnil(L);
  else if (j.is_boolean()) lua_pushboolean(L, j.get<bool>());
  else if (j.is_number()) lua_pushnumber(L, j.get<double>());
  else if (j.is_string()) lua_pushstring(L, j.get<std::string>().c_str());
  else if (j.is_array()) {
    lua_createtable(L, static_cast<int>(j.size()), 0);
    for (size_t i = 0; i < j.size(); ++i) {
      lx_push_json(L, j[i]);
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
  } else {
    lua_newtable(L);
    for (auto& [k, v] : j.items()) {
      lx_push_json(L, v);
      lua_setfield(L, -2, k.c_str());
    }
  }
}

void open_models(lua_State* L) {
  lua_newtable(L);
  lx_set_funcs(L, models_functions);
  lua_setfield(L, -2, "models");
  lx_set_func(L, "save", w_save);
  lx_set_func(L, "load", w_load);
  lx_set_func(L, "read_json", w_read_json);
  lx_set_func(L, "write_json", w_write_json);
  lx_set_func(L, "json_encode", w_json_encode);
  lx_set_func(L, "_set_empty_weights", w_set_empty_weights);
  lx_set_func(L, "_closest_names", w_closest_names);
  lx_set_func(L, "json_decode", w_json_decode);
}

}  // namespace slapo
