// slapo-lua tune SCRIPT [options] [-- ARGS]: the tuner (stdlib/slapo/tune.lua) from the command
// line; `--show DB` prints a database's leaderboard.
#include <cstdlib>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "host/commands.h"
#include "io/json_file.h"
#include "lua/runtime.h"
#include "lua/state.h"

namespace slapo {

namespace {
// The tuner's own refusals ("tune: the database 'x' is a directory ...") are for the user: shown
// without the Lua location and traceback, which stay for anything else (a bug to report).
std::string user_facing(std::string message) {
  std::string bare = bare_error_message(message);
  return bare.rfind("tune", 0) == 0 ? bare : message;
}
}  // namespace

std::string set_knobs_env(const std::vector<std::string>& assignments) {
  nlohmann::json knobs = nlohmann::json::object();
  if (const char* env = std::getenv("SLAPO_KNOBS"); env && *env) {
    try {
      knobs = parse_json_limited(std::string(env));
    } catch (const std::exception& e) {
      return fmt::format("SLAPO_KNOBS is not valid JSON: {}", e.what());
    }
    if (!knobs.is_object()) return "SLAPO_KNOBS must be a JSON object";
  }
  for (auto& a : assignments) {
    auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0)
      return fmt::format("--knob takes name=value (--knob batch=16), got '{}'", a);
    std::string name = a.substr(0, eq), text = a.substr(eq + 1);
    char* end = nullptr;
    double number = std::strtod(text.c_str(), &end);
    if (text == "true" || text == "false") knobs[name] = text == "true";
    else if (!text.empty() && end && *end == '\0') knobs[name] = number;
    else knobs[name] = text;
  }
  ::setenv("SLAPO_KNOBS", knobs.dump().c_str(), 1);
  return "";
}

int cmd_tune(const TuneArgs& a) {
  try {
    LuaState lua;
    if (!a.show.empty()) {
      lua.call_stdlib("slapo.tune", "show", a.show, 0);
      return 0;
    }
    lua_State* L = lua.get();
    lua.push_stdlib_function("slapo.tune", "run");
    lua_newtable(L);
    auto set_string = [&](const char* key, const std::string& v) {
      lua_pushstring(L, v.c_str());
      lua_setfield(L, -2, key);
    };
    auto set_number = [&](const char* key, double v) {
      lua_pushnumber(L, v);
      lua_setfield(L, -2, key);
    };
    set_string("script", a.script);
    set_string("db", a.db);
    set_string("search", a.search);
    set_number("nproc", a.nproc);
    set_number("budget", a.budget);
    set_number("from_plan", a.from_plan);
    set_number("timeout", a.timeout);
    set_number("memory_mib", a.memory_mib);
    lua_createtable(L, static_cast<int>(a.args.size()), 0);
    for (size_t i = 0; i < a.args.size(); ++i) {
      lua_pushstring(L, a.args[i].c_str());
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
    lua_setfield(L, -2, "args");
    lx_pcall(L, 1, 1);
    lua_getfield(L, -1, "best");
    bool found = !lua_isnil(L, -1);
    return found ? 0 : 1;  // no configuration ran well: a script can tell
  } catch (const std::exception& e) {
    report_error(user_facing(e.what()));
    return 1;
  }
}

}  // namespace slapo
