#include "core/expert_groups.h"

#include <functional>

namespace slapo {

std::vector<std::pair<std::string, int>> expert_parallel_blocks(const Module& root) {
  std::vector<std::pair<std::string, int>> out;
  std::function<void(const Module&, const std::string&)> visit = [&](const Module& m, const std::string& path) {
    if (m.meta().expert_group >= 0) {
      out.emplace_back(path, m.meta().expert_group);
      return;
    }
    for (auto& [name, child] : m.children_in_order()) visit(*child, path.empty() ? name : path + "." + name);
  };
  visit(root, "");
  return out;
}

std::unordered_map<const c10::TensorImpl*, int> expert_group_by_tensor(const Module& root) {
  std::unordered_map<const c10::TensorImpl*, int> out;
  std::function<void(const Module&)> visit = [&](const Module& m) {
    if (m.meta().expert_group >= 0) {
      for (auto& p : m.child("experts")->parameters()) out.emplace(p.unsafeGetTensorImpl(), m.meta().expert_group);
      return;
    }
    for (auto& [name, child] : m.children_in_order()) visit(*child);
  };
  visit(root);
  return out;
}

}  // namespace slapo
