// A schedule as it stood at one moment, to put back in place: verify rolls back the primitives
// of a schedule that failed its check.
#pragma once

#include <memory>
#include <unordered_map>
#include <vector>

#include "core/schedule.h"

namespace slapo {

class ScheduleSnapshot {
 public:
  /// Records the whole tree `node` belongs to (from its root): every schedule node, every module
  /// object and the log's length.
  explicit ScheduleSnapshot(const Schedule& node);

  /// Puts every recorded node and module object back as it was and drops the log entries added
  /// since. Objects are restored in place, so the model and schedule handles a script holds stay
  /// valid; modules and nodes created since are dropped from the tree. Tensors come back as the
  /// tensors they were (a change to their values made in place is not undone).
  void restore() const;

  /// Log entries added since the snapshot.
  size_t primitives_since() const;

 private:
  struct SavedNode {
    std::shared_ptr<Schedule> node;
    std::shared_ptr<Module> mod;
    std::vector<std::shared_ptr<Schedule>> children;
  };
  std::vector<SavedNode> nodes_;
  std::unordered_map<Module*, std::pair<std::shared_ptr<Module>, std::shared_ptr<const Module::SavedState>>> modules_;
  /// Each traced graph in the tree and a copy of it as it was (rewritten in place since, maybe).
  std::vector<std::pair<std::shared_ptr<TracedGraph>, std::shared_ptr<const TracedGraph>>> graphs_;
  std::shared_ptr<Schedule> root_;
  size_t log_size_ = 0;
};

}  // namespace slapo
