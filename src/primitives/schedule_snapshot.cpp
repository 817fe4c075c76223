// Recording and restoring a schedule tree in place.
#include "primitives/schedule_snapshot.h"

#include <functional>

#include "graph/traced_graph.h"

namespace slapo {

ScheduleSnapshot::ScheduleSnapshot(const Schedule& node) {
  root_ = std::const_pointer_cast<Schedule>(node.shared_from_this());
  while (auto parent = root_->parent()) root_ = parent;
  log_size_ = root_->log().size();
  std::function<void(const std::shared_ptr<Schedule>&)> visit_node = [&](const std::shared_ptr<Schedule>& s) {
    nodes_.push_back({s, s->mod_, s->children_});
    for (auto& child : s->children_) visit_node(child);
  };
  visit_node(root_);
  // Every module object, including ones a node does not name (a wrapper's inner children).
  std::function<void(const std::shared_ptr<Module>&)> visit_module = [&](const std::shared_ptr<Module>& m) {
    if (modules_.count(m.get())) return;
    modules_.emplace(m.get(), std::make_pair(m, m->save_state()));
    if (auto& graph = m->meta().graph) graphs_.emplace_back(graph, graph->copy());
    for (auto& [name, child] : m->children_in_order()) visit_module(child);
  };
  visit_module(root_->mod_);
}

void ScheduleSnapshot::restore() const {
  for (auto& [ptr, saved] : modules_) saved.first->restore_state(*saved.second);
  for (auto& [graph, as_it_was] : graphs_) graph->assign(*as_it_was);
  for (auto& saved : nodes_) {
    saved.node->mod_ = saved.mod;
    saved.node->children_ = saved.children;
  }
  root_->log().truncate(log_size_);
}

size_t ScheduleSnapshot::primitives_since() const {
  size_t now = root_->log().size();
  return now > log_size_ ? now - log_size_ : 0;
}

}  // namespace slapo
