// LuaJIT's trace compiler and pairs(): before the fixes of 2022-04-02 (LuaJIT issue #827) and
// 2026-08-18 (#1510) a traversal loop that is compiled, exited and despecialised can end early or
// skip a key, silently: an options table copied with pairs() loses a default. Debian 12's LuaJIT
// (2.1.0-beta3, git 2022-03-20) has both bugs, so there the interpreter runs everything.
#include "lua/jit_policy.h"

#include <cstdlib>
#include <regex>

#include <fmt/format.h>
#include <luajit.h>

#include "core/error.h"

namespace slapo {
namespace {

// LuaJIT 2.1's rolling releases number themselves by their commit's time: the first with both fixes
constexpr long long kFirstFixedRolling = 1787058514;  // 27f169c6, 2026-08-18

bool traversal_fixed(const std::string& version, std::string* why) {
  std::smatch m;
  if (std::regex_search(version, m, std::regex(R"(LuaJIT 2\.0\.)"))) {
    *why = "2.0 does not compile pairs() loops";
    return true;
  }
  if (std::regex_search(version, m, std::regex(R"(LuaJIT 2\.1\.(\d{9,}))")) &&
      std::stoll(m[1].str()) >= kFirstFixedRolling) {
    *why = "its compiled pairs() loops keep every key (LuaJIT issues #827, #1510 fixed)";
    return true;
  }
  *why = fmt::format("its compiled pairs() loops can skip keys (LuaJIT issues #827, #1510; fixed in LuaJIT 2.1.{})",
                     kFirstFixedRolling);
  return false;
}

}  // namespace

JitChoice choose_jit(const std::string& version, const char* env_value) {
  std::string why;
  bool fixed = traversal_fixed(version, &why);
  std::string env = env_value ? env_value : "";
  if (env == "on") return {true, fmt::format("JIT compiler on (SLAPO_JIT=on){}", fixed ? "" : "; " + why)};
  if (env == "off") return {false, "JIT compiler off (SLAPO_JIT=off)"};
  if (!env.empty())
    throw Error(fmt::format("SLAPO_JIT: unknown value '{}' (choices: on, off; unset chooses by the LuaJIT version)", env));
  if (fixed) return {true, "JIT compiler on: " + why};
  return {false, "JIT compiler off: " + why + "; SLAPO_JIT=on turns it on"};
}

JitChoice apply_jit_policy(lua_State* L) {
  lua_getglobal(L, "jit");
  lua_getfield(L, -1, "version");
  std::string version = lua_isstring(L, -1) ? lua_tostring(L, -1) : LUAJIT_VERSION;
  lua_pop(L, 2);
  JitChoice choice = choose_jit(version, std::getenv("SLAPO_JIT"));
  luaJIT_setmode(L, 0, LUAJIT_MODE_ENGINE | (choice.compiler_on ? LUAJIT_MODE_ON : LUAJIT_MODE_OFF));
  return choice;
}

}  // namespace slapo
