// The schedule tree: building it from a module tree, path lookup, printing.
#include "core/schedule.h"

#include <algorithm>
#include <sstream>

#include "core/error.h"
#include "core/tree_format.h"

namespace slapo {

std::shared_ptr<Schedule> Schedule::create(std::shared_ptr<Module> root, std::shared_ptr<dist::Group> group) {
  if (!root) throw Error("create_schedule: the model is empty");
  if (!group) throw Error("create_schedule: no group given (the caller passes dist::world() for every rank)");
  return make_node(std::move(root), "", "", {}, std::make_shared<ScheduleLog>(), std::move(group));
}


void Schedule::rebind_module(std::shared_ptr<Module> module) {
  mod_ = std::move(module);
  mod_->set_profile_label(mod_->type_name() + " " + path_);
  refresh_children();
}

std::shared_ptr<Schedule> Schedule::make_node(std::shared_ptr<Module> mod, std::string path, std::string name,
                                              std::weak_ptr<Schedule> parent, std::shared_ptr<ScheduleLog> log,
                                              std::shared_ptr<dist::Group> group) {
  std::shared_ptr<Schedule> node(new Schedule());
  node->mod_ = std::move(mod);
  node->path_ = std::move(path);
  node->name_ = std::move(name);
  node->parent_ = std::move(parent);
  node->log_ = std::move(log);
  node->group_ = std::move(group);
  node->mod_->set_profile_label(node->path_.empty() ? node->mod_->type_name()
                                                    : node->mod_->type_name() + " " + node->path_);
  node->refresh_children();
  return node;
}

void Schedule::refresh_children() {
  children_.clear();
  for (auto& [child_name, child] : mod_->children_in_order()) {
    std::string child_path = path_.empty() ? child_name : path_ + "." + child_name;
    children_.push_back(make_node(child, child_path, child_name, weak_from_this(), log_, group_));
  }
}

std::string Schedule::stale_reason() const {
  std::shared_ptr<const Schedule> node = shared_from_this();
  for (auto parent = node->parent(); parent; node = parent, parent = node->parent()) {
    auto& siblings = parent->children_;
    if (std::find(siblings.begin(), siblings.end(), node) != siblings.end()) continue;
    bool slot_taken = false;
    for (auto& [name, child] : parent->mod_->children_in_order()) slot_taken |= name == node->name_;
    return fmt::format("{} was replaced (it is now {}, {})", parent->where(), parent->mod_->type_name(),
                       slot_taken ? fmt::format("whose '{}' is another module", node->name_)
                                  : fmt::format("which has no '{}'", node->name_));
  }
  return "";
}

std::string Schedule::where() const { return path_.empty() ? "the root module" : "'" + path_ + "'"; }

std::shared_ptr<Schedule> Schedule::at(const std::string& relative_path) const {
  auto node = std::const_pointer_cast<Schedule>(shared_from_this());
  if (relative_path.empty()) return node;
  std::stringstream tokens(relative_path);
  std::string token;
  while (std::getline(tokens, token, '.')) {
    std::shared_ptr<Schedule> next;
    for (auto& c : node->children_)
      if (c->name_ == token) next = c;
    if (!next) {
      std::vector<std::string> names;
      for (auto& c : node->children_) names.push_back(c->name_);
      auto close = closest_names(token, names);
      std::string hint = close.empty() ? "" : fmt::format(" (did you mean '{}'?)", close[0]);
      if (names.empty())
        throw Error(fmt::format("schedule: no module '{}' under {}{}: {} ({}) has no children", token, node->where(),
                                hint, node->where(), node->mod_->type_name()));
      throw Error(fmt::format("schedule: no module '{}' under {}{}; its children are: {}", token, node->where(), hint,
                              join_or_none(names)));
    }
    node = next;
  }
  return node;
}

std::vector<std::pair<std::string, std::shared_ptr<Schedule>>> Schedule::named_schedules() const {
  std::vector<std::pair<std::string, std::shared_ptr<Schedule>>> out;
  std::function<void(const Schedule&, const std::string&)> visit = [&](const Schedule& s, const std::string& prefix) {
    for (auto& c : s.children_) {
      std::string rel = prefix.empty() ? c->name_ : prefix + "." + c->name_;
      out.emplace_back(rel, c);
      visit(*c, rel);
    }
  };
  visit(*this, "");
  return out;
}

std::string Schedule::to_string() const {
  TreeNotes notes;
  const auto& entries = log_->entries();
  for (size_t i = 0; i < entries.size(); ++i) {
    const LogEntry& e = entries[i];
    std::string note = fmt::format("{}({})", e.primitive, fmt::join(e.lua_args, ", "));
    std::string path = log_->current_path(i, e.primitive, e.path);
    if (path != e.path) note += fmt::format(" from {}", e.path);
    notes[path].push_back(std::move(note));
  }
  return format_tree(*mod_, path_, &notes);
}

}  // namespace slapo
