// The schedule tree: one node per module path, holding the module and the shared log.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "core/module.h"
#include "core/schedule_log.h"

namespace slapo {

namespace dist {
class Group;
}

class Schedule : public std::enable_shared_from_this<Schedule> {
 public:
  /// A schedule over `root` whose primitives shard and sync over `group` (callers pass dist::world()
  /// for every rank: core never picks a group itself, and callers check that it holds this rank);
  /// every descendant module gets a node.
  static std::shared_ptr<Schedule> create(std::shared_ptr<Module> root, std::shared_ptr<dist::Group> group);

  const std::string& path() const { return path_; }  ///< "" for the root
  const std::string& name() const { return name_; }  ///< last path token, "" for the root
  std::shared_ptr<Module> mod() const { return mod_; }
  std::shared_ptr<Schedule> parent() const { return parent_.lock(); }
  /// The ranks its primitives shard and sync over (their rank and size: group()->rank(), size()).
  const std::shared_ptr<dist::Group>& group() const { return group_; }
  ScheduleLog& log() { return *log_; }
  const ScheduleLog& log() const { return *log_; }

  /// The node at `relative_path` ("encoder.layer.0") below this one. An unknown token raises an
  /// error naming the closest existing children.
  std::shared_ptr<Schedule> at(const std::string& relative_path) const;
  /// Direct children, in module order.
  const std::vector<std::shared_ptr<Schedule>>& children() const { return children_; }
  /// Every descendant, pre-order, with its path relative to this node.
  std::vector<std::pair<std::string, std::shared_ptr<Schedule>>> named_schedules() const;

  /// The module tree under this node, with the primitives applied to each path as notes.
  std::string to_string() const;

  /// Rebuilds the nodes below this one from its module (after a primitive rewired children).
  void refresh_children();
  /// Points this node at `module` (after its parent's slot was swapped) and rebuilds below it.
  void rebind_module(std::shared_ptr<Module> module);

  /// "'bert.encoder'" or "the root module", for error messages.
  std::string where() const;
  /// Empty while this node is in its root's tree; else why not (a primitive replaced an ancestor,
  /// so the module this handle names is no longer in the model).
  std::string stale_reason() const;

 private:
  friend class ScheduleSnapshot;  // puts nodes back in place on rollback
  Schedule() = default;
  static std::shared_ptr<Schedule> make_node(std::shared_ptr<Module> mod, std::string path, std::string name,
                                             std::weak_ptr<Schedule> parent, std::shared_ptr<ScheduleLog> log,
                                             std::shared_ptr<dist::Group> group);

  std::string path_, name_;
  std::shared_ptr<Module> mod_;
  std::weak_ptr<Schedule> parent_;
  std::vector<std::shared_ptr<Schedule>> children_;
  std::shared_ptr<ScheduleLog> log_;
  std::shared_ptr<dist::Group> group_;
};

}  // namespace slapo
