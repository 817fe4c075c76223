// Checksums of whole files, so a checkpoint can tell a file changed after it was written.
#pragma once

#include <string>

namespace slapo {

/// The CRC-32 (zlib's, as gzip and zip record it) of the file at `path`, as 8 lowercase hex digits.
/// Throws naming the file when it cannot be read.
std::string crc32_of_file(const std::string& path);

}  // namespace slapo
