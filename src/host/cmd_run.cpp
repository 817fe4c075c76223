// `slapo-lua run` and `slapo-lua inspect`: one Lua state, one script.
#include <fmt/format.h>

#include <filesystem>

#include "host/commands.h"
#include "lua/runtime.h"
#include "lua/state.h"

namespace slapo {

void report_error(const std::string& message) { fmt::print(stderr, "slapo-lua: {}\n", message); }

int cmd_run(const std::string& script, const std::vector<std::string>& args) {
  if (!std::filesystem::exists(script)) {
    report_error(fmt::format("run: no script '{}'", script));
    return 2;
  }
  try {
    LuaState lua;
    lua.run_file(script, args);
  } catch (const std::exception& e) {
    report_error(e.what());
    return 1;
  }
  return 0;
}

int cmd_inspect(const std::string& model) {
  try {
    LuaState lua;
    lua_State* L = lua.get();
    lua_getglobal(L, "require");
    lua_pushstring(L, "slapo.inspect");
    lx_pcall(L, 1, 1);
    lua_getfield(L, -1, "main");
    lua_pushstring(L, model.c_str());
    lx_pcall(L, 1, 0);
  } catch (const std::exception& e) {
    report_error(e.what());
    return 1;
  }
  return 0;
}

}  // namespace slapo
