// CRC-32 of a file through zlib, read in blocks (a checkpoint shard can be gigabytes).
#include "io/checksum.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace slapo {

std::string crc32_of_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("checksum: cannot read '{}': {}", path, std::strerror(errno)));
  std::vector<char> block(1 << 22);
  uLong crc = ::crc32(0L, Z_NULL, 0);
  while (in) {
    in.read(block.data(), static_cast<std::streamsize>(block.size()));
    auto n = in.gcount();
    if (n > 0) crc = ::crc32(crc, reinterpret_cast<const Bytef*>(block.data()), static_cast<uInt>(n));
  }
  if (in.bad()) throw Error(fmt::format("checksum: reading '{}' failed", path));
  return fmt::format("{:08x}", static_cast<uint32_t>(crc));
}

}  // namespace slapo
