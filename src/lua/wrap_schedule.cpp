// slapo.Schedule: sch["a.b"], fields path/name/mod/parent, named_schedules, tostring, log.
#include <cstring>

#include "core/error.h"
#include "core/schedule.h"
#include "lua/runtime.h"
#include "lua/wrap.h"

namespace slapo {

namespace {

int w_Schedule_gc(lua_State* L) {
  using Ptr = std::shared_ptr<Schedule>;
  lx_check_schedule(L, 1).~Ptr();
  return 0;
}

int w_Schedule_tostring(lua_State* L) {
  lua_pushstring(L, lx_check_schedule(L, 1)->to_string().c_str());
  return 1;
}

int w_Schedule_eq(lua_State* L) {
  lua_pushboolean(L, luaL_testudata(L, 1, "slapo.Schedule") && luaL_testudata(L, 2, "slapo.Schedule") &&
                         lx_check_schedule(L, 1) == lx_check_schedule(L, 2));
  return 1;
}

int w_Schedule_log(lua_State* L) {
  lua_pushstring(L, lx_check_schedule(L, 1)->log().to_lua().c_str());
  return 1;
}

int w_Schedule_named_schedules(lua_State* L) {
  auto all = lx_check_schedule(L, 1)->named_schedules();
  lua_createtable(L, static_cast<int>(2 * all.size()), 0);
  for (size_t i = 0; i < all.size(); ++i) {
    lua_pushstring(L, all[i].first.c_str());
    lua_rawseti(L, -2, static_cast<int>(2 * i + 1));
    lx_push_schedule(L, all[i].second);
    lua_rawseti(L, -2, static_cast<int>(2 * i + 2));
  }
  return lx_push_pairs_iterator(L);
}

int w_Schedule_children(lua_State* L) {
  auto& children = lx_check_schedule(L, 1)->children();
  lua_createtable(L, static_cast<int>(children.size()), 0);
  for (size_t i = 0; i < children.size(); ++i) {
    lx_push_schedule(L, children[i]);
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}

// sch.path, sch.name, sch.mod, sch.parent, sch.rank, sch.world_size, else sch["a.b.c"].
int schedule_fields(lua_State* L) {
  auto& s = lx_check_schedule(L, 1);
  if (lua_type(L, 2) != LUA_TSTRING)
    return luaL_error(L, "schedule: index with a module path string like sch[\"encoder.layer.0\"], got %s",
                      luaL_typename(L, 2));
  const char* key = lua_tostring(L, 2);
  if (!std::strcmp(key, "path")) lua_pushstring(L, s->path().c_str());
  else if (!std::strcmp(key, "name")) lua_pushstring(L, s->name().c_str());
  else if (!std::strcmp(key, "mod")) lx_push_module(L, s->mod());
  else if (!std::strcmp(key, "parent")) {
    if (auto p = s->parent()) lx_push_schedule(L, p);
    else lua_pushnil(L);
  } else if (!std::strcmp(key, "rank")) lua_pushnumber(L, s->group().rank);
  else if (!std::strcmp(key, "world_size")) lua_pushnumber(L, s->group().world_size);
  else lx_push_schedule(L, s->at(key));
  return 1;
}

int w_create_schedule(lua_State* L) {
  lx_push_schedule(L, Schedule::create(lx_check_module(L, 1)));
  return 1;
}

const luaL_Reg schedule_methods[] = {{"log", w_Schedule_log},
                                     {"named_schedules", w_Schedule_named_schedules},
                                     {"children", w_Schedule_children},
                                     {nullptr, nullptr}};

const luaL_Reg schedule_meta[] = {
    {"__gc", w_Schedule_gc}, {"__tostring", w_Schedule_tostring}, {"__eq", w_Schedule_eq}, {nullptr, nullptr}};

}  // namespace

void open_schedule(lua_State* L) {
  lx_new_class(L, "slapo.Schedule", schedule_methods, schedule_meta, schedule_fields);
  lua_pushcfunction(L, w_create_schedule);
  lua_setfield(L, -2, "create_schedule");
}

}  // namespace slapo
