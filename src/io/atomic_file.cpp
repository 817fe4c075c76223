#include "io/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace slapo {

namespace fs = std::filesystem;

namespace {
// fsync a file or directory by path: its data (or its entries) reach the disk before what follows.
void sync_to_disk(const fs::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY);
  if (fd < 0) return;
  ::fsync(fd);
  ::close(fd);
}
}  // namespace

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write,
                           const char* caller) {
  std::string tmp = fmt::format("{}.tmp.{}", path, ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw Error(fmt::format("{}: cannot write '{}': {}", caller, path, std::strerror(errno)));
    write(out);
    out.flush();
    if (!out) {
      std::error_code ignored;
      fs::remove(tmp, ignored);
      throw Error(fmt::format("{}: writing '{}' failed: {}", caller, path, std::strerror(errno)));
    }
  }
  sync_to_disk(tmp);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp, ec);
    throw Error(fmt::format("{}: cannot rename '{}' to '{}': {}", caller, tmp, path, ec.message()));
  }
  auto dir = fs::path(path).parent_path();
  sync_to_disk(dir.empty() ? fs::path(".") : dir);
}

}  // namespace slapo
