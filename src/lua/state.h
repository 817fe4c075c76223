// A LuaJIT state with the slapo module loaded: what `run`, `test`, `inspect` and the REPL use.
#pragma once

#include <lua.hpp>

#include <memory>
#include <string>
#include <vector>

namespace slapo {

class LuaState {
 public:
  LuaState();
  ~LuaState();
  LuaState(const LuaState&) = delete;
  LuaState& operator=(const LuaState&) = delete;

  lua_State* get() const { return L_; }

  /// Runs a script file with `arg[0] = path` and `arg[1..n] = args`. Throws LuaError (message and
  /// Lua traceback) when loading or running fails.
  void run_file(const std::string& path, const std::vector<std::string>& args = {});
  /// Runs a chunk of Lua source; throws LuaError on failure.
  void run_string(const std::string& code, const std::string& chunkname = "=(slapo)");

  /// Pushes require(module)[function], to be called with lx_pcall; throws LuaError when the module
  /// does not load.
  void push_stdlib_function(const std::string& module, const std::string& function);
  /// Calls require(module)[function](argument) and leaves `nresults` results on the stack;
  /// throws LuaError on failure.
  void call_stdlib(const std::string& module, const std::string& function, const std::string& argument, int nresults);

 private:
  lua_State* L_;
  std::shared_ptr<bool> alive_;
};

/// A Lua error's own words: without the "file.lua:12: " of the raising line in front and the stack
/// traceback after. For errors that are the user's input, not a bug to report.
std::string bare_error_message(const std::string& message);
/// A Lua error's message with its location, without the stack traceback: for errors raised in a
/// user's callback, where the location is theirs and the traceback runs through ours.
std::string without_traceback(const std::string& message);

}  // namespace slapo
