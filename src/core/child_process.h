// Starting child processes: one place for fork and exec, so the launcher's ranks, the tuner's
// trials and profile-device's copies get the same care. The child's environment and arguments are
// built before fork (between fork and exec the child makes only async-signal-safe calls: the
// parent may have threads), it dies with this process, and it can have a process group of its own.
#pragma once

#include <sys/types.h>

#include <map>
#include <string>
#include <vector>

namespace slapo {

struct ChildSpec {
  std::vector<std::string> argv;  ///< argv[0] is the program, looked up on PATH unless `program` is set
  std::string program;            ///< the file to execute in place of argv[0]'s lookup ("/proc/self/exe")
  std::map<std::string, std::string> env;  ///< set in the child, over this process's environment
  std::vector<std::string> unset;          ///< names left out of the child's environment
  int stdout_fd = -1, stderr_fd = -1;      ///< where its output goes (-1: where this process's goes)
  bool discard_output = false;             ///< stdout and stderr to /dev/null (over the two above)
  bool stdin_null = false;                 ///< stdin from /dev/null instead of this process's
  bool own_group = false;                  ///< a process group of its own: stop_child_group ends it all
  double memory_mib = 0;                   ///< caps its address space (RLIMIT_AS); 0: no cap
};

/// Starts the child and returns its pid. It is killed (SIGKILL) when this process ends, and exits
/// with 127 when it cannot be executed. Throws Error naming `who` when fork fails.
pid_t start_child(const ChildSpec& spec, const std::string& who);

/// Ends a child started with `own_group` and everything in its group: SIGTERM, then SIGKILL after
/// `grace_seconds`; reaps it into `*status`.
void stop_child_group(pid_t pid, int* status, double grace_seconds = 3);

}  // namespace slapo
