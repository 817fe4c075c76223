// A module whose forward is a Lua function: slapo.nn.Module{type=, children=, params=, forward=}.
#pragma once

#include <lua.hpp>

#include "core/module.h"

namespace slapo {

/// Marks a Lua state alive until the host closes it; modules holding Lua references check it.
std::shared_ptr<bool> lx_state_alive_flag(lua_State* L);
void lx_register_state_alive_flag(lua_State* L, std::shared_ptr<bool>* flag);

class LuaModule : public ModuleBase<LuaModule> {
 public:
  /// Takes the function at `fn_index` as forward(self, ...).
  LuaModule(lua_State* L, std::string type_name, int fn_index);

 protected:
  Value forward(Values args) override;

 private:
  // One registry reference shared by every copy; released while the state is still open.
  struct Ref {
    lua_State* main;
    int ref;
    std::shared_ptr<bool> alive;
    ~Ref();
  };
  std::shared_ptr<Ref> forward_;
};

}  // namespace slapo
