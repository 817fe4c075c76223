// Edit-distance suggestions for error messages, and LibTorch's messages without their backtrace.
#include "core/error.h"

#include <c10/util/Exception.h>

#include <algorithm>

#include "core/torch_error.h"

namespace slapo {

namespace {
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}
}  // namespace

std::vector<std::string> closest_names(const std::string& wanted,
                                       const std::vector<std::string>& names, size_t limit) {
  std::vector<std::pair<size_t, std::string>> scored;
  for (auto& name : names) {
    size_t d = edit_distance(wanted, name);
    // Only suggest names that share at least half of their letters with the wanted one.
    if (d <= std::max<size_t>(2, std::max(wanted.size(), name.size()) / 2)) scored.emplace_back(d, name);
  }
  std::stable_sort(scored.begin(), scored.end(),
                   [](auto& x, auto& y) { return x.first < y.first; });
  std::vector<std::string> out;
  for (auto& s : scored) {
    if (out.size() == limit) break;
    out.push_back(s.second);
  }
  return out;
}

std::string message_without_backtrace(const std::exception& e) {
  if (auto* c10_error = dynamic_cast<const c10::Error*>(&e)) return c10_error->what_without_backtrace();
  return e.what();
}

}  // namespace slapo
