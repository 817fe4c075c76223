// `slapo-lua repl [SCRIPT]`: an interactive prompt over one Lua state, with libedit line
// editing, history and tab completion (the Lua half is stdlib/slapo/repl.lua).
#include <editline/readline.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <fmt/format.h>
#include <string>

#include "host/commands.h"
#include "slapo/build_config.h"
#include "lua/runtime.h"
#include "lua/state.h"

namespace slapo {

namespace fs = std::filesystem;

namespace {

LuaState* g_repl_state = nullptr;  // for the completion callbacks, which take no context
std::vector<std::string> g_matches;

// Calls require("slapo.repl")[fn](args...) and leaves its results.
void call_repl(lua_State* L, const char* fn, std::initializer_list<std::string> args, int nresults) {
  lua_getglobal(L, "require");
  lua_pushstring(L, "slapo.repl");
  lx_pcall(L, 1, 1);
  lua_getfield(L, -1, fn);
  lua_remove(L, -2);
  for (auto& a : args) lua_pushlstring(L, a.data(), a.size());
  lx_pcall(L, static_cast<int>(args.size()), nresults);
}

char* next_match(const char*, int state) {
  static size_t index;
  if (state == 0) index = 0;
  if (index >= g_matches.size()) return nullptr;
  return strdup(g_matches[index++].c_str());
}

char** complete(const char* text, int, int) {
  rl_attempted_completion_over = 1;  // never fall back to file names
  g_matches.clear();
  lua_State* L = g_repl_state->get();
  int top = lua_gettop(L);
  try {
    call_repl(L, "complete", {std::string(rl_line_buffer, static_cast<size_t>(rl_point)), text}, 1);
    for (size_t i = 1; i <= lua_objlen(L, -1); ++i) {
      lua_rawgeti(L, -1, static_cast<int>(i));
      g_matches.emplace_back(lua_tostring(L, -1));
      lua_pop(L, 1);
    }
  } catch (const std::exception&) {
    // no completions
  }
  lua_settop(L, top);
  // Paths and fields are completed a level at a time: no space after them.
  rl_completion_append_character = '\0';
  return g_matches.empty() ? nullptr : rl_completion_matches(text, next_match);
}

std::string history_path() {
  const char* state = std::getenv("XDG_STATE_HOME");
  const char* home = std::getenv("HOME");
  fs::path dir = state && *state ? fs::path(state) : fs::path(home ? home : ".") / ".local" / "state";
  dir /= "slapo-lua";
  std::error_code ec;
  fs::create_directories(dir, ec);
  return (dir / "history").string();
}

// One line from the terminal (libedit) or from a pipe; false at end of input.
bool read_line(const char* prompt, std::string& line, bool interactive) {
  if (interactive) {
    char* raw = readline(prompt);
    if (!raw) return false;
    line = raw;
    std::free(raw);
    return true;
  }
  fmt::print("{}", prompt);
  std::fflush(stdout);
  return static_cast<bool>(std::getline(std::cin, line));
}

}  // namespace

int cmd_repl(const std::string& script) {
  bool interactive = ::isatty(STDIN_FILENO);
  try {
    join_world_from_env();
    LuaState lua;
    g_repl_state = &lua;
    if (!script.empty()) {
      try {
        lua.run_file(script);
      } catch (const std::exception& e) {
        fmt::print(stderr, "{}\n", e.what());
      }
    }
    std::string history = history_path();
    if (interactive) {
      rl_readline_name = const_cast<char*>("slapo-lua");
      rl_basic_word_break_characters = " \t\n\"'`([{=,+-*/<>~;#";
      rl_attempted_completion_function = complete;
      using_history();
      read_history(history.c_str());
      fmt::print("slapo-lua {}: Lua with slapo; TAB completes, slapo.help() lists primitives, Ctrl-D quits\n",
                 SLAPO_VERSION);
    }
    lua_State* L = lua.get();
    std::string buffer, line;
    while (read_line(buffer.empty() ? "slapo> " : "   >> ", line, interactive)) {
      buffer += buffer.empty() ? line : "\n" + line;
      if (buffer.empty()) continue;
      int top = lua_gettop(L);
      call_repl(L, "eval", {buffer}, 2);
      std::string status = lua_tostring(L, -2);
      std::string text = lua_isstring(L, -1) ? lua_tostring(L, -1) : "";
      lua_settop(L, top);
      if (status == "incomplete") continue;
      if (interactive) {
        add_history(buffer.c_str());
        write_history(history.c_str());
      }
      if (status == "error") fmt::print(stderr, "{}\n", text);
      else if (!text.empty()) fmt::print("{}\n", text);
      std::fflush(stdout);
      std::fflush(stderr);
      buffer.clear();
    }
    if (interactive) fmt::print("\n");
  } catch (const std::exception& e) {
    report_error(e.what());
    return 1;
  }
  g_repl_state = nullptr;
  return 0;
}

}  // namespace slapo
