// `slapo-lua test PATH...`: spec files each in a fresh Lua state, then must-fail scripts.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "distributed/world.h"
#include "host/commands.h"
#include "host/launcher.h"
#include "lua/runtime.h"
#include "lua/state.h"

namespace slapo {

namespace fs = std::filesystem;

namespace {

struct Tally {
  int passed = 0, failed = 0, skipped = 0;
};

bool is_error_script(const fs::path& p) { return p.parent_path().filename() == "errors" && p.extension() == ".lua"; }
bool is_spec(const fs::path& p) {
  auto name = p.filename().string();
  return name.size() > 9 && name.compare(name.size() - 9, 9, "_spec.lua") == 0;
}

void run_spec(const fs::path& file, Tally& tally) {
  if (!std::getenv("SLAPO_TEST_QUIET")) fmt::print("# {}\n", file.string());
  std::fflush(stdout);
  try {
    LuaState lua;
    lua_State* L = lua.get();
    lua.call_stdlib("slapo.test", "run_file", file.string(), 3);
    tally.passed += static_cast<int>(lua_tonumber(L, -3));
    tally.failed += static_cast<int>(lua_tonumber(L, -2));
    tally.skipped += static_cast<int>(lua_tonumber(L, -1));
  } catch (const std::exception& e) {
    fmt::print("FAIL {}: {}\n", file.string(), e.what());
    tally.failed += 1;
  }
  std::fflush(stdout);
}

// A must-fail script's first line is "-- expect: <the error message>": the message must be exactly
// that, once a leading "file.lua:N: " location (where the script made the bad call) and the
// runner's traceback are set aside.
void run_error_script(const fs::path& file, Tally& tally) {
  std::ifstream in(file);
  std::string first;
  std::getline(in, first);
  const std::string marker = "-- expect: ";
  if (first.rfind(marker, 0) != 0) {
    fmt::print("FAIL {}: first line must be '-- expect: <the error message>'\n", file.string());
    tally.failed += 1;
    return;
  }
  std::string expected = first.substr(marker.size());
  try {
    LuaState lua;
    lua.run_file(file.string());
    fmt::print("FAIL {}: ran without the expected error '{}'\n", file.string(), expected);
    tally.failed += 1;
  } catch (const std::exception& e) {
    std::string msg = bare_error_message(e.what());
    if (msg == expected) {
      fmt::print("ok   {} fails with '{}'\n", file.string(), expected);
      tally.passed += 1;
    } else {
      fmt::print("FAIL {}: expected the error '{}', got: {}\n", file.string(), expected, msg);
      tally.failed += 1;
    }
  }
}

}  // namespace

int cmd_test(const std::vector<std::string>& paths, const LaunchOptions& launch) {
  if (launch.needs_launcher() && !std::getenv("RANK")) {
    std::vector<std::string> command{"test"};
    command.insert(command.end(), paths.begin(), paths.end());
    end_launcher(launch_ranks(launch, command));
  }
  // Ranks join the world first; only rank 0 prints passes and the summary.
  bool quiet = false;
  try {
    quiet = join_world_from_env() != 0;
  } catch (const std::exception& e) {
    report_error(e.what());
    return 1;
  }
  if (quiet) ::setenv("SLAPO_TEST_QUIET", "1", 1);
  std::vector<fs::path> specs, error_scripts;
  for (auto& p : paths) {
    if (fs::is_directory(p)) {
      for (auto& entry : fs::recursive_directory_iterator(p)) {
        if (!entry.is_regular_file()) continue;
        if (is_error_script(entry.path())) error_scripts.push_back(entry.path());
        else if (is_spec(entry.path())) specs.push_back(entry.path());
      }
    } else if (fs::is_regular_file(p)) {
      (is_error_script(p) ? error_scripts : specs).push_back(p);
    } else {
      report_error(fmt::format("test: no file or directory '{}'", p));
      return 2;
    }
  }
  std::sort(specs.begin(), specs.end());
  std::sort(error_scripts.begin(), error_scripts.end());
  Tally tally;
  for (auto& s : specs) run_spec(s, tally);
  for (auto& e : error_scripts) run_error_script(e, tally);
  // A run that checked nothing (no cases, or every case skipped) is not a pass.
  if (!quiet && tally.passed == 0 && tally.failed == 0)
    fmt::print("FAIL {}: no case ran{}\n", fmt::join(paths, " "), tally.skipped ? " (every case was skipped)" : "");
  if (!quiet) fmt::print("{} passed, {} failed, {} skipped\n", tally.passed, tally.failed, tally.skipped);
  return tally.failed == 0 && tally.passed > 0 ? 0 : 1;
}

}  // namespace slapo
