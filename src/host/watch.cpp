// `slapo-lua run --watch SCRIPT`: run the script, then run it again, in a fresh Lua state, each
// time a .lua file in its directory changes (editors that save by renaming included), until
// interrupted. A failing run shows its error and the watcher waits for the next change.
#include <poll.h>
#include <sys/inotify.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fmt/format.h>
#include <map>
#include <thread>

#include "host/commands.h"
#include "lua/state.h"

namespace slapo {

namespace fs = std::filesystem;

namespace {

bool is_lua(const std::string& name) { return name.size() > 4 && name.compare(name.size() - 4, 4, ".lua") == 0; }

// Modification times of the directory's .lua files (the poll fallback compares them).
std::map<std::string, fs::file_time_type> lua_mtimes(const fs::path& dir) {
  std::map<std::string, fs::file_time_type> out;
  std::error_code ec;
  for (auto& entry : fs::directory_iterator(dir, ec))
    if (entry.is_regular_file(ec) && is_lua(entry.path().filename().string()))
      out[entry.path().string()] = entry.last_write_time(ec);
  return out;
}

// Blocks until a .lua file in `dir` changes. inotify watches the directory (a watch on the file
// itself is lost when an editor renames a new file over it); without inotify, poll mtimes.
void wait_for_change(const fs::path& dir) {
  int fd = ::inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (fd >= 0 && ::inotify_add_watch(fd, dir.c_str(), IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE) >= 0) {
    alignas(inotify_event) char buffer[4096];
    for (bool changed = false; !changed;) {
      pollfd p{fd, POLLIN, 0};
      if (::poll(&p, 1, -1) <= 0) continue;
      ssize_t n;
      while ((n = ::read(fd, buffer, sizeof(buffer))) > 0) {
        for (char* at = buffer; at < buffer + n;) {
          auto* event = reinterpret_cast<inotify_event*>(at);
          if (event->len && is_lua(event->name)) changed = true;
          at += sizeof(inotify_event) + event->len;
        }
      }
    }
    ::close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(30));  // let a multi-write save finish
    return;
  }
  if (fd >= 0) ::close(fd);
  auto before = lua_mtimes(dir);
  while (lua_mtimes(dir) == before) std::this_thread::sleep_for(std::chrono::milliseconds(300));
}

}  // namespace

int cmd_watch(const std::string& script, const std::vector<std::string>& args) {
  fs::path dir = fs::absolute(script).parent_path();
  for (int run = 1;; ++run) {
    fmt::print(stderr, "[watch] run {} of {}\n", run, script);
    std::fflush(stderr);
    try {
      LuaState lua;
      lua.run_file(script, args);
      std::fflush(stdout);  // the run's output before the watcher's line, when both go to one file
      fmt::print(stderr, "[watch] finished; waiting for changes to {}/*.lua (Ctrl-C stops)\n", dir.string());
    } catch (const std::exception& e) {
      std::fflush(stdout);
      report_error(e.what());
      fmt::print(stderr, "[watch] failed; fix it and save: waiting for changes to {}/*.lua (Ctrl-C stops)\n",
                 dir.string());
    }
    std::fflush(stdout);
    std::fflush(stderr);
    wait_for_change(dir);
  }
}

}  // namespace slapo
