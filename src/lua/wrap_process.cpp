// Child processes for the tuner: slapo.run_process runs a command in its own process group with
// a time limit, its output into a log file; slapo._executable, slapo._machine and slapo._file_hash (internal: the stdlib's)
// say what ran where.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/child_process.h"
#include "core/data_dirs.h"
#include "core/error.h"
#include "core/sanitizer.h"
#include "lua/runtime.h"
#include "lua/wrap.h"

namespace slapo {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::map<std::string, std::string> string_map(lua_State* L, int idx, const char* fn) {
  std::map<std::string, std::string> out;
  if (lua_isnil(L, idx)) return out;
  if (!lua_istable(L, idx)) throw Error(fmt::format("{}: env must be a table of strings, got {}", fn, luaL_typename(L, idx)));
  lua_pushnil(L);
  while (lua_next(L, idx)) {
    if (lua_type(L, -2) != LUA_TSTRING || (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER))
      throw Error(fmt::format("{}: env must map names to strings", fn));
    out[lua_tostring(L, -2)] = lua_tostring(L, -1);
    lua_pop(L, 1);
  }
  return out;
}

// run_process(argv, {env = {NAME = value}, timeout = seconds, log = path, memory_mib = n})
//   -> {status = "exited" | "signaled" | "timeout", code =, signal =, seconds =}
// The child gets its own process group (its ranks with it), dies with this process, and writes
// stdout and stderr to `log` (appended; /dev/null without one). memory_mib caps each process's
// address space (RLIMIT_AS), so an allocation past it fails as out-of-memory would.
int w_run_process(lua_State* L) {
  const char* fn = "run_process";
  auto argv_s = lx_check_strings(L, 1, fn, "argv");
  lx_check_option_keys(L, 2, {"env", "timeout", "log", "memory_mib"}, fn);
  std::map<std::string, std::string> env;
  if (lua_istable(L, 2)) {
    lua_getfield(L, 2, "env");
    env = string_map(L, lua_gettop(L), fn);
    lua_pop(L, 1);
  }
  double timeout = lx_opt_number_in(L, 2, "timeout", 0, 0, 1e7, fn);  // 0: none
  double memory_mib = lx_opt_number_in(L, 2, "memory_mib", 0, 0, 1e9, fn);
  if (memory_mib > 0 && kAddressSanitizer)
    throw Error(fmt::format("{}: memory_mib cannot cap a process of this AddressSanitizer build (its shadow memory "
                            "takes terabytes of address space); use the regular build for memory limits", fn));
  std::string log = lx_opt_string(L, 2, "log", "/dev/null", fn);
  int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (log_fd < 0) throw Error(fmt::format("{}: cannot open the log '{}': {}", fn, log, std::strerror(errno)));
  ChildSpec spec;
  spec.argv = std::move(argv_s);
  spec.env = std::move(env);
  spec.stdout_fd = spec.stderr_fd = log_fd;
  spec.stdin_null = true;
  spec.own_group = true;  // its ranks with it
  spec.memory_mib = memory_mib;
  auto t0 = std::chrono::steady_clock::now();
  pid_t pid = -1;
  try {
    pid = start_child(spec, fn);
  } catch (...) {
    ::close(log_fd);
    throw;
  }
  ::close(log_fd);
  int status = 0;
  bool timed_out = false;
  while (::waitpid(pid, &status, WNOHANG) == 0) {
    if (timeout > 0 && seconds_since(t0) > timeout) {
      timed_out = true;
      stop_child_group(pid, &status);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid, SIGKILL);  // whatever of the group outlived its leader
  lua_newtable(L);
  if (timed_out) {
    lua_pushstring(L, "timeout");
  } else if (WIFSIGNALED(status)) {
    lua_pushstring(L, "signaled");
    lua_pushinteger(L, WTERMSIG(status));
    lua_setfield(L, -3, "signal");
  } else {
    lua_pushstring(L, "exited");
    lua_pushinteger(L, WEXITSTATUS(status));
    lua_setfield(L, -3, "code");
  }
  lua_setfield(L, -2, "status");
  lua_pushnumber(L, seconds_since(t0));
  lua_setfield(L, -2, "seconds");
  return 1;
}

// executable() -> the path of this program (trials run it again)
int w_executable(lua_State* L) {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  lua_pushstring(L, ec ? "slapo-lua" : exe.c_str());
  return 1;
}

// program_name() -> the program as the user invoked it, for suggested commands (core/data_dirs.h)
int w_program_name(lua_State* L) {
  lua_pushstring(L, program_name().c_str());
  return 1;
}

// machine() -> "host, N cores" : which machine a measurement belongs to
int w_machine(lua_State* L) {
  char host[256] = {0};
  ::gethostname(host, sizeof(host) - 1);
  auto text = fmt::format("{}, {} cores", host, std::thread::hardware_concurrency());
  lua_pushstring(L, text.c_str());
  return 1;
}

// file_hash(path) -> 16 hex digits (FNV-1a 64 of the bytes): which version of a script ran
int w_file_hash(lua_State* L) {
  std::string path = luaL_checkstring(L, 1);
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("file_hash: cannot read '{}'", path));
  uint64_t h = 1469598103934665603ULL;
  char c;
  while (in.get(c)) {
    h ^= static_cast<unsigned char>(c);
    h *= 1099511628211ULL;
  }
  auto hex = fmt::format("{:016x}", h);
  lua_pushstring(L, hex.c_str());
  return 1;
}

}  // namespace

void open_process(lua_State* L) {
  lx_set_func(L, "run_process", w_run_process);
  lx_set_func(L, "_executable", w_executable);
  lx_set_func(L, "_program_name", w_program_name);
  lx_set_func(L, "_machine", w_machine);
  lx_set_func(L, "_file_hash", w_file_hash);
}

}  // namespace slapo
