// `slapo-lua run` and `slapo-lua inspect`: one Lua state, one script.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <cstring>
#include <fstream>

#include <torch/csrc/autograd/profiler_legacy.h>

#include "core/error.h"
#include "distributed/world.h"
#include "host/commands.h"
#include "host/launcher.h"
#include "lua/runtime.h"
#include "lua/state.h"

namespace slapo {

void report_error(const std::string& message) { fmt::print(stderr, "slapo-lua: {}\n", message); }

int join_world_from_env() {
  auto world = dist::options_from_env();
  if (world.world_size > 1 || world.backend == "nccl") {  // NCCL runs on one rank too
    dist::init(world);
    std::setvbuf(stdout, nullptr, _IOLBF, 0);  // the launcher interleaves ranks' output by line
  }
  return world.rank;
}

namespace {
// os.exit(code) on a rank of a launched run records the exit before the process ends: its peers
// notice the closed connections while static destructors still run, and the launcher must see
// which came first.
std::string exit_error_file;
int exit_rank = 0;

int exit_recording(lua_State* L) {
  int code = lua_isnoneornil(L, 1)  ? 0
             : lua_isboolean(L, 1) ? (lua_toboolean(L, 1) ? 0 : 1)
                                   : static_cast<int>(lua_tointeger(L, 1));
  if (code != 0) write_error_file(exit_error_file, exit_rank, fmt::format("exited with code {} (os.exit)", code));
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, lua_gettop(L) - 1, 0);
  return 0;
}

void record_failing_exits(lua_State* L, const std::string& error_file, int rank) {
  exit_error_file = error_file;
  exit_rank = rank;
  lua_getglobal(L, "os");
  lua_getfield(L, -1, "exit");
  lua_pushcclosure(L, exit_recording, 1);
  lua_setfield(L, -2, "exit");
  lua_pop(L, 1);
}
}  // namespace

int cmd_run(const std::string& script, const std::vector<std::string>& args, const LaunchOptions& launch,
            const std::string& profile) {
  if (!std::filesystem::exists(script)) {
    report_error(fmt::format("run: no script '{}'", script));
    return 2;
  }
  if (launch.needs_launcher() && !std::getenv("RANK")) {
    std::vector<std::string> command{"run"};
    if (!profile.empty()) command.insert(command.end(), {"--profile", profile});
    command.push_back(script);
    command.insert(command.end(), args.begin(), args.end());
    end_launcher(launch_ranks(launch, command));
  }
  const char* error_file = std::getenv("SLAPO_ERROR_FILE");
  int rank = 0;
  try {
    rank = join_world_from_env();
    // A chrome trace (chrome://tracing, Perfetto) of every op, with a span per module call named
    // by its type and path; each rank of a multi-rank run writes its own file.
    std::unique_ptr<torch::autograd::profiler::RecordProfile> profiler;
    std::string path = profile;
    if (!profile.empty()) {
      if (dist::world()->size() > 1) {
        auto dot = path.rfind(".json");
        path = (dot == std::string::npos ? path : path.substr(0, dot)) + fmt::format("-rank{}.json", rank);
      }
      // LibTorch opens the file only when the run ends: a path it cannot write is refused now
      if (!std::ofstream(path, std::ios::app))
        throw Error(fmt::format("run: --profile '{}' cannot be written: {}", path, std::strerror(errno)));
      profiler = std::make_unique<torch::autograd::profiler::RecordProfile>(path);
    }
    LuaState lua;
    if (error_file) record_failing_exits(lua.get(), error_file, rank);
    lua.run_file(script, args);
    // a --knob the script never declared is most likely a typo: say so once
    if (rank == 0 && std::getenv("SLAPO_KNOBS")) lua.run_string("require('slapo.knobs').warn_unused()");
    if (profiler) {
      profiler.reset();  // writes the trace
      fmt::print(stderr, "profile: wrote {} (open it in chrome://tracing or ui.perfetto.dev)\n", path);
    }
  } catch (const std::exception& e) {
    if (error_file) write_error_file(error_file, rank, e.what());
    else report_error(e.what());
    return 1;
  }
  return 0;
}

int cmd_plot(const std::vector<std::string>& files) {
  try {
    LuaState lua;
    lua_State* L = lua.get();
    lua.push_stdlib_function("slapo.plot", "main");
    for (auto& f : files) lua_pushstring(L, f.c_str());
    lx_pcall(L, static_cast<int>(files.size()), 0);
  } catch (const std::exception& e) {
    report_error(bare_error_message(e.what()));  // a file that is not there: no traceback to read
    return 1;
  }
  return 0;
}

int cmd_inspect(const std::string& model) {
  try {
    LuaState lua;
    lua.call_stdlib("slapo.inspect", "main", model, 0);
  } catch (const std::exception& e) {
    report_error(bare_error_message(e.what()));  // a name that is no model: no traceback to read
    return 1;
  }
  return 0;
}

}  // namespace slapo
