// Whether LuaJIT's trace compiler runs: off on the LuaJIT releases whose compiled table traversal
// silently drops keys of a pairs() loop, on where that is fixed, SLAPO_JIT=on|off to choose.
#pragma once

#include <lua.hpp>

#include <string>

namespace slapo {

struct JitChoice {
  bool compiler_on = false;
  std::string reason;  // one line for --version and slapo.luajit
};

/// The choice for LuaJIT `version` (as jit.version reads, "LuaJIT 2.1.0-beta3" or a rolling
/// "LuaJIT 2.1.1787058514") under the environment's SLAPO_JIT value (null when unset). Throws
/// slapo::Error naming the valid values for any other SLAPO_JIT.
JitChoice choose_jit(const std::string& version, const char* env_value);

/// Applies choose_jit to state L (its jit.version, getenv("SLAPO_JIT")) and returns the choice.
JitChoice apply_jit_policy(lua_State* L);

}  // namespace slapo
