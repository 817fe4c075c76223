// The exception bridge, protected callbacks, userdata boxes and Lua <-> IValue conversion.
#include "lua/runtime.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <typeinfo>

#include <fmt/ranges.h>

#include "core/error.h"
#include "lua/tensor_gc.h"

namespace slapo {

namespace {

thread_local lua_State* t_current = nullptr;

std::string registered_function_name(lua_State* L);
std::string function_name_of(lua_State* L, lua_CFunction f);

// A LibTorch error raised inside one of the API's functions, prefixed with the function's Lua
// name and the shapes of the tensors it was given: "view: shape '[3, 5]' is invalid for input of
// size 6 (tensor arguments: [2, 3])". Metamethods (a module's __call) keep ATen's message alone.
std::string aten_error_message(lua_State* L, const char* what);

// "bad argument #1 to '?' (...)" on the top of the stack -> "... to 'tensor' (...)", without the
// traceback a message handler may have added (raising it again adds one). False: left as it was.
bool name_unnamed_function(lua_State* L, lua_CFunction f) {
  if (lua_type(L, -1) != LUA_TSTRING) return false;
  std::string message = lua_tostring(L, -1);
  auto unnamed = message.find(" to '?'");
  if (unnamed == std::string::npos) return false;
  std::string name = function_name_of(L, f);
  if (name.empty()) return false;
  message.replace(unnamed, 7, " to '" + name + "'");
  if (auto traceback = message.find("\nstack traceback:"); traceback != std::string::npos) message.resize(traceback);
  lua_pop(L, 1);
  lua_pushstring(L, message.c_str());
  return true;
}

// LuaJIT turns a C++ exception that crosses a Lua frame into the bare message "C++ exception".
// One global wrapper (LUAJIT_MODE_WRAPCFUNC) catches it first and raises a Lua error carrying
// the real message. lua_error runs after the catch block so the exception object is destroyed.
int wrap_exceptions(lua_State* L, lua_CFunction f) {
  lua_State* previous = t_current;
  t_current = L;
  try {
    int n = f(L);
    t_current = previous;
    return n;
  } catch (const c10::Error& e) {
    lua_pushstring(L, aten_error_message(L, e.what_without_backtrace()).c_str());
  } catch (const std::exception& e) {
    // LibTorch 1.x throws some checks (view's shape) as a bare std::runtime_error; ours and Lua's
    // errors are subclasses that already say where they come from
    bool from_libtorch = typeid(e) == typeid(std::runtime_error);
    lua_pushstring(L, from_libtorch ? aten_error_message(L, e.what()).c_str() : e.what());
  } catch (...) {
    // A Lua error raised inside f, or inside Lua that f called: LuaJIT lets C++ catch it, its
    // message on the stack. Only luaL_check*'s "bad argument #1 to '?'" (f called by pcall or in
    // a tail call has no name for Lua to give) is raised again, with the name f was registered
    // under; anything else goes on untouched.
    t_current = previous;
    if (!name_unnamed_function(L, f)) throw;
  }
  t_current = previous;
  return lua_error(L);
}

// The running C function's name: the one its caller used ("verify", "shard"), else the one it was
// registered under (a pcall'ed function has no caller's name), else "".
std::string running_function_name(lua_State* L) {
  lua_Debug ar;
  if (!lua_getstack(L, 0, &ar)) return "";
  if (lua_getinfo(L, "n", &ar) && ar.name) return ar.name;
  return registered_function_name(L);
}

// The name `f` was registered under (lx_set_func), else "".
std::string function_name_of(lua_State* L, lua_CFunction f) {
  std::string name;
  lua_getfield(L, LUA_REGISTRYINDEX, "slapo.function_names");
  if (lua_istable(L, -1)) {
    lua_pushlightuserdata(L, reinterpret_cast<void*>(f));
    lua_rawget(L, -2);
    if (lua_isstring(L, -1)) name = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  lua_pop(L, 1);
  return name;
}

// The name the running C function was registered under (lx_set_func), else "".
std::string registered_function_name(lua_State* L) {
  lua_Debug ar;
  if (!lua_getstack(L, 0, &ar)) return "";
  std::string name;
  if (lua_getinfo(L, "f", &ar) && lua_iscfunction(L, -1)) name = function_name_of(L, lua_tocfunction(L, -1));
  lua_pop(L, 1);
  return name;
}

}  // namespace

std::string lx_type_name(lua_State* L, int idx) {
  std::string name = luaL_typename(L, idx);
  if (lua_type(L, idx) == LUA_TUSERDATA && lua_getmetatable(L, idx)) {
    lua_getfield(L, -1, "__name");
    if (lua_isstring(L, -1)) name = lua_tostring(L, -1);
    lua_pop(L, 2);
  }
  if (name == "slapo.Schedule") return "a schedule (its module is sch.mod)";
  return name;
}

namespace {

template <class T>
T* box_check(lua_State* L, int idx, const char* tname, const char* what) {
  void* p = luaL_testudata(L, idx, tname);
  if (!p) {
    std::string got_name = lx_type_name(L, idx);
    const char* got = got_name.c_str();
    std::string fn = running_function_name(L);
    if (idx < 0)  // a value taken out of a table argument: Lua's position would read "#-1"
      luaL_error(L, "%s%severy entry of the table must be a %s, got %s", fn.c_str(), fn.empty() ? "" : ": ", what, got);
    luaL_error(L, "%s%sbad argument #%d: %s expected, got %s", fn.c_str(), fn.empty() ? "" : ": ", idx, what, got);
  }
  return static_cast<T*>(p);
}

template <class T>
void box_push(lua_State* L, T value, const char* tname) {
  void* p = lua_newuserdata(L, sizeof(T));
  new (p) T(std::move(value));
  luaL_getmetatable(L, tname);
  lua_setmetatable(L, -2);
}

}  // namespace

void lx_install_exception_bridge(lua_State* L) {
  lua_pushlightuserdata(L, reinterpret_cast<void*>(wrap_exceptions));
  luaJIT_setmode(L, -1, LUAJIT_MODE_WRAPCFUNC | LUAJIT_MODE_ON);
  lua_pop(L, 1);
}

lua_State* lx_current_state(lua_State* fallback) { return t_current ? t_current : fallback; }

// The message handler of lx_pcall: the message and one traceback (an error re-raised through a C
// function already carries one), without frames that are only a C address ("[C]: at 0x55...":
// LuaJIT's name for a wrapped C function's own frame); SLAPO_FULL_TRACEBACK=1 keeps them.
int lx_traceback(lua_State* L) {
  // a command-line mistake (util.usage_error): its message alone
  if (lua_istable(L, 1) && luaL_getmetafield(L, 1, "__slapo_no_traceback")) {
    lua_pop(L, 1);
    if (luaL_callmeta(L, 1, "__tostring") && lua_isstring(L, -1)) return 1;
  }
  const char* msg = lua_tostring(L, 1);
  if (!msg) {
    if (luaL_callmeta(L, 1, "__tostring") && lua_isstring(L, -1)) msg = lua_tostring(L, -1);
    else msg = lua_pushfstring(L, "(error object is a %s value)", luaL_typename(L, 1));
  }
  if (std::strstr(msg, "\nstack traceback:")) {
    lua_pushstring(L, msg);
    return 1;
  }
  luaL_traceback(L, L, msg, 1);
  const char* full = std::getenv("SLAPO_FULL_TRACEBACK");
  if (full && std::string(full) == "1") return 1;
  std::istringstream lines(lua_tostring(L, -1));
  std::string line, out;
  while (std::getline(lines, line))
    // "\t[C]: at 0x..." and LuaJIT's "\t[builtin#19]: at 0x...": an address, nothing to read;
    // "\t[C]: in function 'error'": where every raised error passes
    if (!(line.rfind("\t[", 0) == 0 && line.find("]: at 0x") != std::string::npos) &&
        line != "\t[C]: in function 'error'")
      out += (out.empty() ? "" : "\n") + line;
  // a header with no frame left under it says nothing
  const std::string header = "\nstack traceback:";
  if (out.size() >= header.size() && out.compare(out.size() - header.size(), header.size(), header) == 0)
    out.resize(out.size() - header.size());
  lua_pushstring(L, out.c_str());
  return 1;
}

void lx_pcall(lua_State* L, int nargs, int nresults) {
  int base = lua_gettop(L) - nargs;  // the function's index
  lua_pushcfunction(L, lx_traceback);
  lua_insert(L, base);
  int rc = lua_pcall(L, nargs, nresults, base);
  lua_remove(L, base);
  if (rc != 0) {
    std::string msg = lua_tostring(L, -1) ? lua_tostring(L, -1) : "(error object is not a string)";
    lua_pop(L, 1);
    throw LuaError(msg);
  }
}

// ---- boxes ----

// A tensor box remembers what it was charged, so its release matches even if the tensor's
// storage was resized or swapped since (set_data, sharding).
struct TensorBox {
  at::Tensor tensor;
  int64_t charged;
};

namespace {
std::string aten_error_message(lua_State* L, const char* what) {
  // the name the caller used for a field or method (slapo.cat, t:view), else the registered one
  std::string name;
  lua_Debug ar;
  if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "n", &ar) && ar.name && ar.namewhat &&
      (std::string(ar.namewhat) == "method" || std::string(ar.namewhat) == "field"))
    name = ar.name;
  if (name.empty()) name = registered_function_name(L);
  if (name.empty() || name.rfind("__", 0) == 0) return what;
  std::vector<std::string> shapes;
  for (int i = 1; i <= lua_gettop(L); ++i)
    if (auto* box = static_cast<TensorBox*>(luaL_testudata(L, i, "slapo.Tensor")))
      shapes.push_back(box->tensor.defined() ? fmt::format("[{}]", fmt::join(box->tensor.sizes(), ", ")) : "undefined");
  std::string message = fmt::format("{}: {}", name, what);
  if (!shapes.empty()) message += fmt::format(" (tensor arguments: {})", fmt::join(shapes, ", "));
  return message;
}
}  // namespace

void lx_push_tensor(lua_State* L, at::Tensor t) {
  int64_t charge = tensor_gc_charge(t);
  tensor_gc_charge_push(L, charge, t.defined() && t.grad_fn() != nullptr);
  box_push(L, TensorBox{std::move(t), charge}, "slapo.Tensor");
}
at::Tensor& lx_check_tensor(lua_State* L, int idx) {
  return box_check<TensorBox>(L, idx, "slapo.Tensor", "tensor")->tensor;
}
int lx_tensor_gc(lua_State* L) {
  auto* box = box_check<TensorBox>(L, 1, "slapo.Tensor", "tensor");
  tensor_gc_release(box->charged);
  box->~TensorBox();
  return 0;
}
bool lx_is_tensor(lua_State* L, int idx) { return luaL_testudata(L, idx, "slapo.Tensor") != nullptr; }

void lx_push_module(lua_State* L, std::shared_ptr<Module> m) { box_push(L, std::move(m), "slapo.Module"); }
std::shared_ptr<Module>& lx_check_module(lua_State* L, int idx) {
  return *box_check<std::shared_ptr<Module>>(L, idx, "slapo.Module", "module");
}
bool lx_is_module(lua_State* L, int idx) { return luaL_testudata(L, idx, "slapo.Module") != nullptr; }

void lx_push_schedule(lua_State* L, std::shared_ptr<Schedule> s) { box_push(L, std::move(s), "slapo.Schedule"); }
std::shared_ptr<Schedule>& lx_check_schedule(lua_State* L, int idx) {
  return *box_check<std::shared_ptr<Schedule>>(L, idx, "slapo.Schedule", "schedule");
}

// ---- values ----

namespace {
// Tables nested deeper than this are refused rather than recursed into: a table that contains
// itself would otherwise overflow the C stack.
constexpr int kMaxValueDepth = 64;

Value to_value(lua_State* L, int idx, int depth);
}  // namespace

Value lx_to_value(lua_State* L, int idx) { return to_value(L, idx, 0); }

namespace {
Value to_value(lua_State* L, int idx, int depth) {
  idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
  if (lua_istable(L, idx) && depth >= kMaxValueDepth)
    throw Error(fmt::format("value: a table nested more than {} levels deep (does it contain itself?)", kMaxValueDepth));
  luaL_checkstack(L, 4, "value: nested tables");
  switch (lua_type(L, idx)) {
    case LUA_TNONE:
    case LUA_TNIL: return Value();
    case LUA_TBOOLEAN: return Value(static_cast<bool>(lua_toboolean(L, idx)));
    case LUA_TNUMBER: {
      double d = lua_tonumber(L, idx);
      if (std::floor(d) == d && std::fabs(d) < 9.007199254740992e15) return Value(static_cast<int64_t>(d));
      return Value(d);
    }
    case LUA_TSTRING: return Value(std::string(lua_tostring(L, idx)));
    case LUA_TUSERDATA:
      if (lx_is_tensor(L, idx)) return Value(lx_check_tensor(L, idx));
      break;
    case LUA_TTABLE: {
      size_t n = lua_objlen(L, idx);
      bool has_string_keys = false;
      lua_pushnil(L);
      while (lua_next(L, idx)) {
        if (lua_type(L, -2) == LUA_TSTRING) has_string_keys = true;
        lua_pop(L, 1);
      }
      if (has_string_keys) {
        c10::impl::GenericDict dict(c10::StringType::get(), c10::AnyType::get());
        lua_pushnil(L);
        while (lua_next(L, idx)) {
          if (lua_type(L, -2) != LUA_TSTRING)
            throw Error("value: a table with string keys cannot also have array entries");
          dict.insert(std::string(lua_tostring(L, -2)), to_value(L, -1, depth + 1));
          lua_pop(L, 1);
        }
        return dict;
      }
      c10::impl::GenericList list(c10::AnyType::get());
      for (size_t i = 1; i <= n; ++i) {
        lua_rawgeti(L, idx, static_cast<int>(i));
        list.push_back(to_value(L, -1, depth + 1));
        lua_pop(L, 1);
      }
      return list;
    }
    default: break;
  }
  throw Error(fmt::format("value: cannot pass a Lua {} to a module (tensors, numbers, booleans, "
                          "strings, nil and tables of these can be passed)",
                          luaL_typename(L, idx)));
}
}  // namespace

void lx_push_value(lua_State* L, const Value& v) {
  if (v.isNone()) lua_pushnil(L);
  else if (v.isTensor()) lx_push_tensor(L, v.toTensor());
  else if (v.isBool()) lua_pushboolean(L, v.toBool());
  else if (v.isInt()) lua_pushnumber(L, static_cast<lua_Number>(v.toInt()));
  else if (v.isDouble()) lua_pushnumber(L, v.toDouble());
  else if (v.isString()) lua_pushstring(L, v.toStringRef().c_str());
  else if (v.isTuple() || v.isList()) {
    auto items = v.isTuple() ? v.toTupleRef().elements().vec() : v.toListRef().vec();
    lua_createtable(L, static_cast<int>(items.size()), 0);
    for (size_t i = 0; i < items.size(); ++i) {
      lx_push_value(L, items[i]);
      lua_rawseti(L, -2, static_cast<int>(i + 1));
    }
  } else if (v.isGenericDict()) {
    lua_newtable(L);
    for (auto& item : v.toGenericDict()) {
      lx_push_value(L, item.key());
      lx_push_value(L, item.value());
      lua_settable(L, -3);
    }
  } else {
    throw Error(fmt::format("value: cannot hand a {} to Lua", v.tagKind()));
  }
}

// ---- argument lists ----

int lx_last_given_arg(lua_State* L) {
  int top = lua_gettop(L);
  while (top > 0 && lua_isnil(L, top)) --top;
  return top;
}

void lx_check_arg_count(lua_State* L, int max, const char* fn, const char* usage, int self) {
  int given = lx_last_given_arg(L) - self;
  if (given > max)
    throw Error(fmt::format("{}: takes {} argument{}, got {} (the form is {})", fn, max, max == 1 ? "" : "s", given,
                            usage));
}

bool lx_check_opt_boolean(lua_State* L, int idx, bool fallback, const char* fn, const char* what) {
  if (lua_isnoneornil(L, idx)) return fallback;
  if (!lua_isboolean(L, idx)) {
    int type = lua_type(L, idx);
    std::string got = type == LUA_TSTRING ? fmt::format("the string '{}'", lua_tostring(L, idx))
                      : type == LUA_TNUMBER ? fmt::format("the number {}", lua_tostring(L, idx))
                                            : lx_type_name(L, idx);
    throw Error(fmt::format("{}: {} must be true or false, got {}", fn, what, got));
  }
  return lua_toboolean(L, idx);
}

// ---- option tables ----

namespace {
// A string or number where an options table belongs would otherwise read as "no options"
// ("groups=2") or fail with "attempt to index a number value".
void check_options_table(lua_State* L, int idx, const char* fn) {
  if (!lua_istable(L, idx))
    throw Error(fmt::format("{}: options must be a table, got {} (e.g. {{name = value}})", fn, luaL_typename(L, idx)));
}
}  // namespace

void lx_check_option_keys(lua_State* L, int idx, std::initializer_list<const char*> valid, const char* fn) {
  if (lua_isnoneornil(L, idx)) return;
  check_options_table(L, idx, fn);
  idx = idx < 0 ? lua_gettop(L) + idx + 1 : idx;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    lua_pop(L, 1);
    std::string key = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : luaL_typename(L, -1);
    bool known = false;
    for (auto* v : valid) known = known || key == v;
    if (!known) {
      lua_pop(L, 1);
      throw Error(fmt::format("{}: unknown option '{}' (valid: {})", fn, key, fmt::join(valid, ", ")));
    }
  }
}

double lx_opt_number(lua_State* L, int table, const char* key, double fallback, const char* fn) {
  if (lua_isnoneornil(L, table)) return fallback;
  check_options_table(L, table, fn);
  lua_getfield(L, table, key);
  double out = fallback;
  if (!lua_isnil(L, -1)) {
    if (!lua_isnumber(L, -1)) luaL_error(L, "%s: option '%s' must be a number, got %s", fn, key, luaL_typename(L, -1));
    out = lua_tonumber(L, -1);
  }
  lua_pop(L, 1);
  return out;
}

bool lx_opt_bool(lua_State* L, int table, const char* key, bool fallback, const char* fn) {
  if (lua_isnoneornil(L, table)) return fallback;
  check_options_table(L, table, fn);
  lua_getfield(L, table, key);
  bool out = fallback;
  if (!lua_isnil(L, -1)) {
    if (!lua_isboolean(L, -1)) luaL_error(L, "%s: option '%s' must be true or false, got %s", fn, key, luaL_typename(L, -1));
    out = lua_toboolean(L, -1);
  }
  lua_pop(L, 1);
  return out;
}

std::string lx_opt_string(lua_State* L, int table, const char* key, const std::string& fallback, const char* fn) {
  if (lua_isnoneornil(L, table)) return fallback;
  check_options_table(L, table, fn);
  lua_getfield(L, table, key);
  std::string out = fallback;
  if (!lua_isnil(L, -1)) {
    if (lua_type(L, -1) != LUA_TSTRING) luaL_error(L, "%s: option '%s' must be a string, got %s", fn, key, luaL_typename(L, -1));
    out = lua_tostring(L, -1);
  }
  lua_pop(L, 1);
  return out;
}

size_t lx_opt_choice(lua_State* L, int table, const char* key, const std::vector<std::string>& choices, size_t fallback,
                     const char* fn) {
  std::string value = lx_opt_string(L, table, key, choices.at(fallback), fn);
  auto it = std::find(choices.begin(), choices.end(), value);
  if (it == choices.end())
    throw Error(fmt::format("{}: option '{}' must be one of \"{}\", got \"{}\"", fn, key, fmt::join(choices, "\", \""), value));
  return static_cast<size_t>(it - choices.begin());
}

double lx_opt_number_in(lua_State* L, int table, const char* key, double fallback, double lo, double hi, const char* fn) {
  double v = lx_opt_number(L, table, key, fallback, fn);
  if (!(v >= lo && v <= hi))
    throw Error(fmt::format("{}: option '{}' must be from {:g} to {:g}, got {}", fn, key, lo, hi,
                            std::isnan(v) ? "NaN" : fmt::format("{:g}", v)));
  return v;
}

int64_t lx_check_integer_value(double value, const char* what, double lo, double hi, const char* fn) {
  if (!(value == std::floor(value)) || value < lo || value > hi)  // NaN fails the first test
    throw Error(fmt::format("{}: {} must be an integer from {} to {}, got {}", fn, what, static_cast<int64_t>(lo),
                            static_cast<int64_t>(hi), std::isnan(value) ? "NaN" : fmt::format("{}", value)));
  return static_cast<int64_t>(value);
}

int lx_push_strings(lua_State* L, const std::vector<std::string>& strings) {
  lua_createtable(L, static_cast<int>(strings.size()), 0);
  for (size_t i = 0; i < strings.size(); ++i) {
    lua_pushstring(L, strings[i].c_str());
    lua_rawseti(L, -2, static_cast<int>(i + 1));
  }
  return 1;
}

std::vector<std::pair<std::string, at::Tensor>> lx_check_named_tensors(lua_State* L, int idx, const char* fn) {
  if (!lua_istable(L, idx)) luaL_error(L, "%s: expected a table {name = tensor, ...}, got %s", fn, luaL_typename(L, idx));
  std::vector<std::pair<std::string, at::Tensor>> out;
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING) luaL_error(L, "%s: table keys must be tensor names (strings)", fn);
    if (!lx_is_tensor(L, -1))
      throw Error(fmt::format("{}: '{}' must be a tensor, got {}", fn, lua_tostring(L, -2), luaL_typename(L, -1)));
    out.emplace_back(lua_tostring(L, -2), lx_check_tensor(L, -1));
    lua_pop(L, 1);
  }
  // in name order: Lua's iteration order may differ between processes
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.first < b.first; });
  return out;
}

void lx_push_named_tensors(lua_State* L, const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  lua_createtable(L, 0, static_cast<int>(tensors.size()));
  for (auto& [name, t] : tensors) {
    lx_push_tensor(L, t);
    lua_setfield(L, -2, name.c_str());
  }
}

std::vector<std::string> lx_check_strings(lua_State* L, int idx, const char* fn, const char* what) {
  if (!lua_istable(L, idx)) throw Error(fmt::format("{}: {} must be an array of strings, got {}", fn, what, luaL_typename(L, idx)));
  std::vector<std::string> out;
  for (size_t i = 1; i <= lua_objlen(L, idx); ++i) {
    lua_rawgeti(L, idx, static_cast<int>(i));
    if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER)
      throw Error(fmt::format("{}: {}[{}] must be a string, got {}", fn, what, i, luaL_typename(L, -1)));
    out.emplace_back(lua_tostring(L, -1));
    lua_pop(L, 1);
  }
  if (out.empty()) throw Error(fmt::format("{}: {} is empty", fn, what));
  return out;
}

std::vector<int64_t> lx_check_shape(lua_State* L, int idx, const char* fn) {
  // sizes are whole numbers a tensor can have: NaN, fractions and 1e300 are refused, not truncated
  auto size_at = [&](int at, int entry) {
    double v = lua_tonumber(L, at);
    if (!(v >= -1 && v <= 9.0e15) || v != std::floor(v))
      throw Error(fmt::format("{}: shape entry {} must be a whole number (a size, or -1 where a view infers it), got {}", fn, entry,
                              lua_tostring(L, at)));
    return static_cast<int64_t>(v);
  };
  if (lua_isnumber(L, idx)) return {size_at(idx, 1)};
  if (!lua_istable(L, idx)) luaL_error(L, "%s: shape must be a table of sizes like {2, 3}, got %s", fn, luaL_typename(L, idx));
  std::vector<int64_t> shape;
  size_t n = lua_objlen(L, idx);
  for (size_t i = 1; i <= n; ++i) {
    lua_rawgeti(L, idx, static_cast<int>(i));
    if (!lua_isnumber(L, -1)) luaL_error(L, "%s: shape entry %d must be a number, got %s", fn, static_cast<int>(i), luaL_typename(L, -1));
    shape.push_back(size_at(lua_gettop(L), static_cast<int>(i)));
    lua_pop(L, 1);
  }
  return shape;
}

namespace {
int pairs_iterator(lua_State* L) {
  int i = static_cast<int>(lua_tonumber(L, lua_upvalueindex(2))) + 1;
  lua_pushnumber(L, i);
  lua_replace(L, lua_upvalueindex(2));
  lua_rawgeti(L, lua_upvalueindex(1), 2 * i - 1);
  if (lua_isnil(L, -1)) return 1;
  lua_rawgeti(L, lua_upvalueindex(1), 2 * i);
  return 2;
}
}  // namespace

int lx_push_pairs_iterator(lua_State* L) {
  lua_pushnumber(L, 0);
  lua_pushcclosure(L, pairs_iterator, 2);
  return 1;
}

void lx_set_func(lua_State* L, const char* name, lua_CFunction f) {
  lua_pushcfunction(L, f);
  lua_setfield(L, -2, name);
  // the name errors use when the caller's own name for the function is unknown (pcall(f, ...))
  lua_getfield(L, LUA_REGISTRYINDEX, "slapo.function_names");
  if (lua_isnil(L, -1)) {
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, "slapo.function_names");
  }
  lua_pushlightuserdata(L, reinterpret_cast<void*>(f));
  lua_pushstring(L, name);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

void lx_set_funcs(lua_State* L, const luaL_Reg* funcs) {
  for (; funcs->name; ++funcs) lx_set_func(L, funcs->name, funcs->func);
}

namespace {
// __index: upvalue 1 = methods table, upvalue 2 = fallback (or nil).
int class_index(lua_State* L) {
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1));
  if (!lua_isnil(L, -1)) return 1;
  lua_pop(L, 1);
  if (lua_isnil(L, lua_upvalueindex(2))) return 0;
  lua_pushvalue(L, lua_upvalueindex(2));
  lua_pushvalue(L, 1);
  lua_pushvalue(L, 2);
  lua_call(L, 2, 1);
  return 1;
}
}  // namespace

void lx_new_class(lua_State* L, const char* name, const luaL_Reg* methods, const luaL_Reg* metamethods,
                  lua_CFunction index_fallback) {
  luaL_newmetatable(L, name);
  lua_pushstring(L, name);
  lua_setfield(L, -2, "__name");
  if (metamethods) lx_set_funcs(L, metamethods);
  lua_newtable(L);
  lx_set_funcs(L, methods);
  lua_pushvalue(L, -1);
  lua_setfield(L, -3, "methods");  // reachable for stdlib sugar: getmetatable(x).methods
  if (index_fallback) lua_pushcfunction(L, index_fallback);
  else lua_pushnil(L);
  lua_pushcclosure(L, class_index, 2);
  lua_setfield(L, -2, "__index");
  lua_pop(L, 1);
}

}  // namespace slapo
