#include "core/data_dirs.h"

#include <cstdlib>
#include <filesystem>

#include "slapo/build_config.h"

namespace slapo {

std::string stdlib_dir() {
  if (const char* dir = std::getenv("SLAPO_STDLIB")) return dir;
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    auto installed = exe.parent_path().parent_path() / "share" / "slapo-lua" / "stdlib";
    if (std::filesystem::is_directory(installed / "slapo", ec)) return installed.string();
  }
  return SLAPO_SOURCE_STDLIB_DIR;  // a build tree runs the checkout's stdlib
}

std::string devices_dir() {
  if (const char* dir = std::getenv("SLAPO_DEVICES")) return dir;
  return stdlib_dir() + "/devices";
}

std::string module_path(const std::string& file) {
  std::error_code ec;
  auto exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  for (auto candidate : {exe.parent_path() / file, exe.parent_path().parent_path() / "lib" / "slapo-lua" / file})
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate.string();
  return "";
}

namespace {
std::string& program_name_storage() {
  static std::string name = "slapo-lua";
  return name;
}
}  // namespace

const std::string& program_name() { return program_name_storage(); }

void set_program_name(const std::string& argv0) {
  if (!argv0.empty() && argv0.rfind("/proc/", 0) != 0) program_name_storage() = argv0;
}

}  // namespace slapo
