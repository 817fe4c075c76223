// Reading a user's JSON file: a regular file, parsed with the nesting limit, errors naming both.
#include "io/json_file.h"

#include <filesystem>
#include <fstream>

#include "core/error.h"

namespace slapo {

nlohmann::json read_json_file(const std::string& path, const std::string& who) {
  // a FIFO or device would block the read (or never end)
  if (!std::filesystem::exists(path)) throw Error(fmt::format("{}: '{}' does not exist", who, path));
  if (!std::filesystem::is_regular_file(path)) throw Error(fmt::format("{}: '{}' is not a regular file", who, path));
  std::ifstream in(path);
  if (!in) throw Error(fmt::format("{}: cannot open '{}'", who, path));
  try {
    return parse_json_limited(in);
  } catch (const std::exception& e) {
    throw Error(fmt::format("{}: '{}' is not valid JSON ({})", who, path, e.what()));
  }
}

}  // namespace slapo
