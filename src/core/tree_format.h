// Torch7-style printing of a module tree: path, type, settings, parameter shapes and counts,
// with runs of identical siblings (transformer layers) collapsed into one entry.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/module.h"

namespace slapo {

/// Notes shown after a module's line, by module path (e.g. the primitives applied to it).
using TreeNotes = std::map<std::string, std::vector<std::string>>;

std::string format_tree(const Module& root, const std::string& root_path = "", const TreeNotes* notes = nullptr);

/// 124439808 -> "124,439,808".
std::string with_commas(int64_t n);

}  // namespace slapo
