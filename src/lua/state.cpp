// Opening a Lua state: libraries, the exception bridge, package.path, slapo.core, `slapo`.
#include "lua/state.h"

#include <regex>

#include "core/data_dirs.h"
#include "core/sanitizer.h"
#include "lua/jit_policy.h"
#include "lua/lua_module.h"
#include "lua/runtime.h"
#include "lua/wrap.h"
#include "slapo/build_config.h"

namespace slapo {

int luaopen_slapo_core(lua_State* L) {
  lua_newtable(L);
  open_tensor(L);
  open_functional(L);
  open_module(L);
  open_nn(L);
  open_models(L);
  open_nn_vision(L);
  open_schedule(L);
  open_dist(L);
  open_data_parallel(L);
  open_verify(L);
  open_pipeline(L);
  open_optim(L);
  open_train(L);
  open_kernels(L);
  open_cuda(L);
  open_plan(L);
  open_text(L);
  open_process(L);
  lua_pushstring(L, SLAPO_VERSION);
  lua_setfield(L, -2, "version");
  lua_pushboolean(L, kAddressSanitizer);  // slapo.sanitized: an AddressSanitizer build (scripts/sanitize)
  lua_setfield(L, -2, "sanitized");
  // slapo._traceback: lx_pcall's message handler for the stdlib's own xpcall (the REPL, hot swaps,
  // a training step's callback), so their tracebacks read as the program's do
  lua_pushcfunction(L, lx_traceback);
  lua_setfield(L, -2, "_traceback");
  // The checkout the stdlib came from (data/ lives there): slapo._source_dir()
  lua_pushstring(L, (stdlib_dir() + "/..").c_str());
  lua_pushcclosure(L, [](lua_State* T) { lua_pushvalue(T, lua_upvalueindex(1)); return 1; }, 1);
  lua_setfield(L, -2, "_source_dir");
  return 1;
}

LuaState::LuaState() : L_(luaL_newstate()), alive_(std::make_shared<bool>(true)) {
  luaL_openlibs(L_);
  JitChoice jit;
  try {
    jit = apply_jit_policy(L_);
  } catch (...) {  // a bad SLAPO_JIT: the state is not made
    lua_close(L_);
    throw;
  }
  lx_install_exception_bridge(L_);
  lx_register_state_alive_flag(L_, &alive_);

  std::string dir = stdlib_dir();
  lua_getglobal(L_, "package");
  lua_getfield(L_, -1, "path");
  std::string path = dir + "/?.lua;" + dir + "/?/init.lua;" + lua_tostring(L_, -1);
  lua_pop(L_, 1);
  lua_pushstring(L_, path.c_str());
  lua_setfield(L_, -2, "path");
  lua_getfield(L_, -1, "preload");
  lua_pushcfunction(L_, luaopen_slapo_core);
  lua_setfield(L_, -2, "slapo.core");
  lua_pop(L_, 2);

  run_string("slapo = require('slapo')", "=(slapo startup)");
  // slapo.luajit: which LuaJIT runs the scripts, and whether its trace compiler does
  lua_getglobal(L_, "slapo");
  lua_createtable(L_, 0, 3);
  lua_getglobal(L_, "jit");
  lua_getfield(L_, -1, "version");
  lua_setfield(L_, -3, "version");
  lua_pop(L_, 1);
  lua_pushboolean(L_, jit.compiler_on);
  lua_setfield(L_, -2, "compiler");
  lua_pushstring(L_, jit.reason.c_str());
  lua_setfield(L_, -2, "reason");
  lua_setfield(L_, -2, "luajit");
  lua_pop(L_, 1);
}

LuaState::~LuaState() {
  // Modules freed while the state closes must not touch its registry any more.
  *alive_ = false;
  lua_close(L_);
}

void LuaState::run_file(const std::string& path, const std::vector<std::string>& args) {
  lua_createtable(L_, static_cast<int>(args.size()), 1);
  lua_pushstring(L_, path.c_str());
  lua_rawseti(L_, -2, 0);
  for (size_t i = 0; i < args.size(); ++i) {
    lua_pushstring(L_, args[i].c_str());
    lua_rawseti(L_, -2, static_cast<int>(i + 1));
  }
  lua_setglobal(L_, "arg");

  // Scripts can require modules that sit beside them.
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  run_string("package.path = " + std::string("[[") + dir + "/?.lua;]] .. package.path", "=(slapo startup)");

  if (luaL_loadfile(L_, path.c_str()) != 0) {
    std::string msg = lua_tostring(L_, -1);
    lua_pop(L_, 1);
    throw LuaError(msg);
  }
  for (auto& a : args) lua_pushstring(L_, a.c_str());
  lx_pcall(L_, static_cast<int>(args.size()), 0);
}

void LuaState::push_stdlib_function(const std::string& module, const std::string& function) {
  lua_getglobal(L_, "require");
  lua_pushstring(L_, module.c_str());
  lx_pcall(L_, 1, 1);
  lua_getfield(L_, -1, function.c_str());
  lua_remove(L_, -2);
}

void LuaState::call_stdlib(const std::string& module, const std::string& function, const std::string& argument,
                           int nresults) {
  push_stdlib_function(module, function);
  lua_pushstring(L_, argument.c_str());
  lx_pcall(L_, 1, nresults);
}

void LuaState::run_string(const std::string& code, const std::string& chunkname) {
  if (luaL_loadbuffer(L_, code.data(), code.size(), chunkname.c_str()) != 0) {
    std::string msg = lua_tostring(L_, -1);
    lua_pop(L_, 1);
    throw LuaError(msg);
  }
  lx_pcall(L_, 0, 0);
}

std::string bare_error_message(const std::string& message) {
  static const std::regex location(R"(^[^:\s]+\.lua:[0-9]+: )");
  return without_traceback(std::regex_replace(message, location, "", std::regex_constants::format_first_only));
}

std::string without_traceback(const std::string& message) {
  return message.substr(0, message.find("\nstack traceback:"));
}

}  // namespace slapo
