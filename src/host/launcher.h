// `slapo-lua run --nproc N`: N local ranks as separate processes under one supervisor.
#pragma once

#include <string>
#include <vector>

namespace slapo {

/// Spawns `nproc` ranks (exec of this program with torchrun's environment), forwards their
/// output ("[rank k] " before lines of ranks other than 0), and when one fails stops the others
/// within seconds and prints the first failure once. Returns the exit code.
/// `command` is what each rank runs after the program name: {"run", script, args...} or
/// {"test", paths...}.
int launch_ranks(int nproc, const std::vector<std::string>& command);

/// A TCP port on the loopback interface that was free a moment ago (29500 when none can be found).
int free_port();

/// In a rank started by the launcher: where to record a failure instead of printing it.
void write_error_file(const std::string& path, int rank, const std::string& message);

}  // namespace slapo
