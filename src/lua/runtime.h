// Glue shared by the src/lua/wrap_*.cpp files: userdata boxes, value conversion, the
// exception bridge and protected calls back into Lua.
#pragma once

#include <lua.hpp>

#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/module.h"

namespace slapo {

class Schedule;

/// A Lua error seen from C++ (a failed callback into Lua); the message carries the traceback.
class LuaError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Routes every C function call from Lua through one wrapper that turns C++ exceptions
/// (c10::Error, slapo::Error, std::exception) into Lua errors with their real message.
void lx_install_exception_bridge(lua_State* L);

/// The Lua thread that is running the innermost C call (callbacks into Lua use it).
lua_State* lx_current_state(lua_State* fallback);

/// Calls the function below `nargs` arguments on the stack with a traceback handler;
/// throws LuaError on failure. Leaves `nresults` results.
void lx_pcall(lua_State* L, int nargs, int nresults);

/// Message handler that appends a Lua traceback (for lua_pcall).
int lx_traceback(lua_State* L);

// ---- userdata boxes ----
void lx_push_tensor(lua_State* L, at::Tensor t);
at::Tensor& lx_check_tensor(lua_State* L, int idx);
bool lx_is_tensor(lua_State* L, int idx);
/// The tensor class's __gc: frees the box and releases its charge on the collector (tensor_gc.h).
int lx_tensor_gc(lua_State* L);

void lx_push_module(lua_State* L, std::shared_ptr<Module> m);
std::shared_ptr<Module>& lx_check_module(lua_State* L, int idx);
bool lx_is_module(lua_State* L, int idx);
/// What the value at `idx` is, for errors: "slapo.Tensor", "a schedule (its module is sch.mod)",
/// or Lua's type name ("number", "nil").
std::string lx_type_name(lua_State* L, int idx);

void lx_push_schedule(lua_State* L, std::shared_ptr<Schedule> s);
std::shared_ptr<Schedule>& lx_check_schedule(lua_State* L, int idx);
/// lx_check_schedule for a primitive `fn`: refuses a stale handle (a node whose module left the
/// model when a primitive replaced an ancestor), naming its path and what replaced it.
std::shared_ptr<Schedule>& lx_check_live_schedule(lua_State* L, int idx, const char* fn);

// ---- values ----
/// Lua value -> IValue: tensor, number (integral -> int), boolean, string, nil, array table ->
/// list, table with string keys -> dict.
Value lx_to_value(lua_State* L, int idx);
/// IValue -> one Lua value (tuples and lists become arrays, dicts tables).
void lx_push_value(lua_State* L, const Value& v);

/// The index of the last argument that is not nil (0 when none): trailing nils are "not given".
int lx_last_given_arg(lua_State* L);
/// Raises naming `fn` and its call form `usage` when an argument past `max` was given: an extra
/// argument is a misunderstanding (F.silu(x, true), nn.ReLU(5)), never something to ignore.
/// `self` is 1 for methods (sub:decompose()): the receiver is not counted.
void lx_check_arg_count(lua_State* L, int max, const char* fn, const char* usage, int self = 0);
/// Argument `idx` as true or false, `fallback` when nil or absent; a string or number ("yes", 1)
/// is an error naming `fn` and `what`, not a truthy value.
bool lx_check_opt_boolean(lua_State* L, int idx, bool fallback, const char* fn, const char* what);

/// Options-table readers: nil when absent, else the typed field (errors name `fn`).
double lx_opt_number(lua_State* L, int table, const char* key, double fallback, const char* fn);
bool lx_opt_bool(lua_State* L, int table, const char* key, bool fallback, const char* fn);
std::string lx_opt_string(lua_State* L, int table, const char* key, const std::string& fallback, const char* fn);
/// options[key] as the index of one of `choices` (`fallback` when absent); any other value is an
/// error that names fn, the key, the value and every choice.
size_t lx_opt_choice(lua_State* L, int table, const char* key, const std::vector<std::string>& choices, size_t fallback,
                     const char* fn);

/// Raises naming `fn` when the options table at `idx` (nil is fine) has a key not in `valid`,
/// listing the valid ones.
/// lx_opt_number whose value must lie in [lo, hi] (NaN never does); the error names fn and key.
double lx_opt_number_in(lua_State* L, int table, const char* key, double fallback, double lo, double hi, const char* fn);
/// `value` as an integer in [lo, hi], else an Error naming `fn` and `what` (NaN and fractions too).
int64_t lx_check_integer_value(double value, const char* what, double lo, double hi, const char* fn);
void lx_check_option_keys(lua_State* L, int idx, std::initializer_list<const char*> valid, const char* fn);

/// A table {name = tensor} <-> named tensors (checkpoint files, optimizer state).
std::vector<std::pair<std::string, at::Tensor>> lx_check_named_tensors(lua_State* L, int idx, const char* fn);
void lx_push_named_tensors(lua_State* L, const std::vector<std::pair<std::string, at::Tensor>>& tensors);

/// Pushes a Lua array of strings; returns 1.
int lx_push_strings(lua_State* L, const std::vector<std::string>& strings);

/// A non-empty Lua array of strings (numbers become strings); errors name `fn` and `what`.
std::vector<std::string> lx_check_strings(lua_State* L, int idx, const char* fn, const char* what);

/// Integer-valued Lua array {2, 3} -> shape.
std::vector<int64_t> lx_check_shape(lua_State* L, int idx, const char* fn);

/// Turns the flat array {name1, value1, name2, value2, ...} on top of the stack into an
/// iterator for `for name, value in ... do`.
int lx_push_pairs_iterator(lua_State* L);

/// table[-1][name] = f, and `name` recorded for error messages about f's arguments.
void lx_set_func(lua_State* L, const char* name, lua_CFunction f);
/// Registers `funcs` into the table on top of the stack.
void lx_set_funcs(lua_State* L, const luaL_Reg* funcs);

/// Defines a metatable `name` whose __index serves `methods` (and `index_fallback` for other keys).
void lx_new_class(lua_State* L, const char* name, const luaL_Reg* methods, const luaL_Reg* metamethods,
                  lua_CFunction index_fallback);

}  // namespace slapo
