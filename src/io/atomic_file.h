// Writing a file so that a reader (or a run killed half-way) sees the old file or the whole new
// one, never a part: written under a name of this process's own, flushed to disk, then renamed.
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace slapo {

/// Writes `path` through `write` atomically. The temporary name carries the process id, so ranks
/// that save the same file at once do not trample each other's halves (the last rename wins,
/// whole). Errors name `caller` and the path.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write,
                           const char* caller);

}  // namespace slapo
