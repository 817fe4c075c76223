// Errors a user can cause (slapo::Error) and helpers that make their messages list the choices.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>
#include <vector>

namespace slapo {

/// A mistake in a script, a schedule or an input file. The message names the function or
/// primitive, the module path, what was wrong and the valid choices.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// An error raised inside a module's call, its message led by the innermost scheduled module's
/// path ("in 'transformer.h.0.mlp.c_fc': ..."). Callers that run modules (trace) add their own words.
class ModuleCallError : public Error {
 public:
  using Error::Error;
};

/// "a, b, c" or "none".
inline std::string join_or_none(const std::vector<std::string>& names) {
  if (names.empty()) return "none";
  return fmt::format("{}", fmt::join(names, ", "));
}

/// The names closest to `wanted` by edit distance (at most `limit`), for "did you mean" hints.
std::vector<std::string> closest_names(const std::string& wanted,
                                       const std::vector<std::string>& names, size_t limit = 3);

}  // namespace slapo
