// A module whose forward is a Lua function: slapo.nn.Module{type=, children=, params=, forward=}.
#pragma once

#include <lua.hpp>

#include "core/module.h"

namespace slapo {

/// Marks a Lua state alive until the host closes it; modules holding Lua references check it.
std::shared_ptr<bool> lx_state_alive_flag(lua_State* L);
void lx_register_state_alive_flag(lua_State* L, std::shared_ptr<bool>* flag);

/// A registry reference to a Lua value, shared by copies, released while its state is open.
struct LuaRef {
  lua_State* main;
  int ref;
  std::shared_ptr<bool> alive;
  ~LuaRef();
  /// References the value at `idx`.
  static std::shared_ptr<LuaRef> from_stack(lua_State* L, int idx);
  /// Pushes the value on the running thread (or the main one); throws if the state closed.
  lua_State* push(const std::string& what) const;
};

/// Calls a Lua function with one value and returns its first result (sync's Lua ops use it).
Value call_lua_function(const LuaRef& fn, const Value& arg, const std::string& what);

class LuaModule : public ModuleBase<LuaModule> {
 public:
  /// Takes the function at `fn_index` as forward(self, ...).
  LuaModule(lua_State* L, std::string type_name, int fn_index);

 protected:
  Value forward(Values args) override;

 private:
  std::shared_ptr<LuaRef> forward_;  // shared by every copy of the module
};

}  // namespace slapo
