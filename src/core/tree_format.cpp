// Module tree printing with collapsed repeats and tied-parameter notes.
#include "core/tree_format.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"

namespace slapo {

std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n < 0 ? -n : n);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return n < 0 ? "-" + out : out;
}

namespace {

bool is_index(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; });
}

std::string join_path(const std::string& prefix, const std::string& name) {
  return prefix.empty() ? name : prefix + "." + name;
}

int64_t subtree_params(const Module& m) {
  int64_t total = 0;
  for (auto& p : unique_named_parameters(m)) total += p.second.numel();
  return total;
}

// Two siblings collapse when their signatures (types, settings, shapes, recursively) are equal.
std::string signature(const Module& m) {
  std::string s = m.type_name() + "(" + m.describe() + ")";
  for (auto& p : m.named_parameters(false)) s += fmt::format("{}[{}]", p.key(), fmt::join(p.value().sizes(), ","));
  for (auto& [name, child] : m.children_in_order()) s += "{" + name + ":" + signature(*child) + "}";
  return s;
}

class TreePrinter {
 public:
  TreePrinter(const TreeNotes* notes) : notes_(notes) {}

  void node(const Module& m, const std::string& label, const std::string& path, int depth, int repeat) {
    std::string line(2 * depth, ' ');
    if (depth > 0) line += "(" + label + ") ";
    if (repeat > 1) line += fmt::format("{} x ", repeat);
    line += m.type_name();
    if (!m.describe().empty()) line += "(" + m.describe() + ")";
    bool leaf = m.children_in_order().empty();
    for (auto& p : m.named_parameters(false)) {
      if (!p.value().defined()) continue;
      std::string full = join_path(path, p.key());
      line += fmt::format("  {} [{}]", p.key(), fmt::join(p.value().sizes(), ", "));
      auto [it, fresh] = owners_.emplace(p.value().unsafeGetTensorImpl(), full);
      if (!fresh) line += " tied to " + it->second;
    }
    int64_t count = subtree_params(m);
    if (!leaf || depth == 0) {
      if (count > 0) line += "  " + with_commas(count) + (repeat > 1 ? " params each" : " params");
    }
    if (notes_) {
      auto found = notes_->find(path);
      if (found != notes_->end())
        for (auto& note : found->second) line += "  <- " + note;
    }
    out_ += line + "\n";

    auto children = m.children_in_order();
    for (size_t i = 0; i < children.size();) {
      size_t j = i + 1;
      std::string sig = signature(*children[i].second);
      // Only numbered siblings (ModuleList entries) collapse: their names carry no meaning.
      while (j < children.size() && is_index(children[i].first) && is_index(children[j].first) &&
             !has_notes_under(join_path(path, children[j].first)) &&
             signature(*children[j].second) == sig)
        ++j;
      const auto& [name, child] = children[i];
      std::string child_path = join_path(path, name);
      std::string child_label = child_path;
      if (j - i > 1) child_label = fmt::format("{}-{}", child_path, children[j - 1].first);
      node(*child, child_label, child_path, depth + 1, static_cast<int>(j - i));
      i = j;
    }
  }

  std::string str() const { return out_; }

 private:
  bool has_notes_under(const std::string& path) const {
    if (!notes_) return false;
    for (auto& [p, n] : *notes_)
      if (p == path || p.rfind(path + ".", 0) == 0) return true;
    return false;
  }

  const TreeNotes* notes_;
  std::unordered_map<c10::TensorImpl*, std::string> owners_;
  std::string out_;
};

}  // namespace

std::string format_tree(const Module& root, const std::string& root_path, const TreeNotes* notes) {
  TreePrinter printer(notes);
  printer.node(root, root_path, root_path, 0, 1);
  std::string s = printer.str();
  if (!s.empty() && s.back() == '\n') s.pop_back();
  return s;
}

}  // namespace slapo
