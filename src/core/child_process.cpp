// fork and exec with the environment built beforehand (see child_process.h).
#include "core/child_process.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"

extern char** environ;

namespace slapo {

namespace {

// The environment a child of `spec` gets, as "NAME=value" strings.
std::vector<std::string> child_environment(const ChildSpec& spec) {
  std::vector<std::string> out;
  for (char** e = environ; *e; ++e) {
    std::string var = *e;
    std::string name = var.substr(0, var.find('='));
    bool replaced = spec.env.count(name) > 0;
    bool removed = std::find(spec.unset.begin(), spec.unset.end(), name) != spec.unset.end();
    if (!replaced && !removed) out.push_back(std::move(var));
  }
  for (const auto& [name, value] : spec.env) out.push_back(name + "=" + value);
  return out;
}

std::vector<char*> pointers(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (auto& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// In the child, between fork and exec: async-signal-safe calls only.
[[noreturn]] void become_child(const ChildSpec& spec, pid_t parent, char* const* argv, char* const* envp) {
  if (spec.own_group) ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);  // the parent died before the line above
  if (spec.discard_output) {
    int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDOUT_FILENO), ::dup2(null_fd, STDERR_FILENO);
  } else {
    if (spec.stdout_fd >= 0) ::dup2(spec.stdout_fd, STDOUT_FILENO);
    if (spec.stderr_fd >= 0) ::dup2(spec.stderr_fd, STDERR_FILENO);
  }
  if (spec.stdin_null) {
    int null_fd = ::open("/dev/null", O_RDONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDIN_FILENO);
  }
  if (spec.memory_mib > 0) {
    rlimit limit;
    limit.rlim_cur = limit.rlim_max = static_cast<rlim_t>(spec.memory_mib * 1024 * 1024);
    ::setrlimit(RLIMIT_AS, &limit);
  }
  if (!spec.program.empty()) ::execve(spec.program.c_str(), argv, envp);
  else ::execvpe(argv[0], argv, envp);
  ::_exit(127);
}

}  // namespace

pid_t start_child(const ChildSpec& spec, const std::string& who) {
  if (spec.argv.empty()) throw Error(fmt::format("{}: no program to start", who));
  std::vector<std::string> argv_s = spec.argv, env_s = child_environment(spec);
  std::vector<char*> argv = pointers(argv_s), envp = pointers(env_s);
  pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) throw Error(fmt::format("{}: cannot start '{}': {}", who, spec.argv[0], std::strerror(errno)));
  if (pid == 0) become_child(spec, parent, argv.data(), envp.data());
  if (spec.own_group) ::setpgid(pid, pid);  // also here: no race with the child's own call
  return pid;
}

void stop_child_group(pid_t pid, int* status, double grace_seconds) {
  ::kill(-pid, SIGTERM);
  auto t0 = std::chrono::steady_clock::now();
  while (::waitpid(pid, status, WNOHANG) == 0) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > grace_seconds) {
      ::kill(-pid, SIGKILL);
      ::waitpid(pid, status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  ::kill(-pid, SIGKILL);  // whatever of the group outlived its leader
}

}  // namespace slapo
