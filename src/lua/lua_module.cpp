// Lua-defined modules: forward runs a Lua function with the module handle as `self`.
#include "lua/lua_module.h"

#include "core/error.h"
#include "lua/runtime.h"

namespace slapo {

namespace {
const char* kAliveKey = "slapo.state_alive";
}

void lx_register_state_alive_flag(lua_State* L, std::shared_ptr<bool>* flag) {
  lua_pushlightuserdata(L, flag);
  lua_setfield(L, LUA_REGISTRYINDEX, kAliveKey);
}

std::shared_ptr<bool> lx_state_alive_flag(lua_State* L) {
  lua_getfield(L, LUA_REGISTRYINDEX, kAliveKey);
  auto* flag = static_cast<std::shared_ptr<bool>*>(lua_touserdata(L, -1));
  lua_pop(L, 1);
  if (!flag) throw Error("slapo.nn.Module: this Lua state was not opened by the slapo host");
  return *flag;
}

LuaRef::~LuaRef() {
  if (*alive) luaL_unref(main, LUA_REGISTRYINDEX, ref);
}

std::shared_ptr<LuaRef> LuaRef::from_stack(lua_State* L, int idx) {
  lua_pushvalue(L, idx);
  int ref = luaL_ref(L, LUA_REGISTRYINDEX);
  return std::shared_ptr<LuaRef>(new LuaRef{L, ref, lx_state_alive_flag(L)});
}

lua_State* LuaRef::push(const std::string& what) const {
  if (!*alive) throw Error(fmt::format("{}: its Lua function belongs to a Lua state that has been closed", what));
  lua_State* L = lx_current_state(main);
  lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
  return L;
}

Value call_lua_function(const LuaRef& fn, const Value& arg, const std::string& what) {
  lua_State* L = lx_current_state(fn.main);
  int top = lua_gettop(L);
  fn.push(what);
  lx_push_value(L, arg);
  try {
    lx_pcall(L, 1, 1);
    Value out = lx_to_value(L, -1);
    lua_settop(L, top);
    return out;
  } catch (const std::exception& e) {
    lua_settop(L, top);
    throw LuaError(fmt::format("{}: {}", what, e.what()));
  }
}

LuaModule::LuaModule(lua_State* L, std::string type_name, int fn_index) : ModuleBase(std::move(type_name)) {
  luaL_checktype(L, fn_index, LUA_TFUNCTION);
  forward_ = LuaRef::from_stack(L, fn_index);
}

Value LuaModule::forward(Values args) {
  lua_State* L = lx_current_state(forward_->main);
  int top = lua_gettop(L);
  forward_->push(type_name());
  lx_push_module(L, std::dynamic_pointer_cast<Module>(shared_from_this()));
  for (auto& a : args) lx_push_value(L, a);
  try {
    lx_pcall(L, static_cast<int>(args.size()) + 1, LUA_MULTRET);
  } catch (const LuaError& e) {
    lua_settop(L, top);
    throw LuaError(fmt::format("{}.forward: {}", type_name(), e.what()));
  }
  int results = lua_gettop(L) - top;
  Value out;
  try {
    if (results == 1) {
      out = lx_to_value(L, top + 1);
    } else if (results > 1) {
      std::vector<Value> items;
      for (int i = 1; i <= results; ++i) items.push_back(lx_to_value(L, top + i));
      out = c10::ivalue::Tuple::create(std::move(items));
    }
  } catch (...) {
    lua_settop(L, top);
    throw;
  }
  lua_settop(L, top);
  return out;
}

}  // namespace slapo
