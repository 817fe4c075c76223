// A module whose forward is a graph cut out of a trace: what checkpoint(subgraph) and
// fuse(subgraph) put in the subgraph's place.
#pragma once

#include <memory>
#include <string>

#include "core/error.h"
#include "core/module.h"
#include "graph/traced_graph.h"

namespace slapo {

class GraphModule : public ModuleBase<GraphModule> {
 public:
  /// The graph is also the module's trace, so graph(), find and the subgraph primitives work
  /// inside the wrapper as in any traced module (and change what it runs).
  GraphModule(std::string type_name, std::shared_ptr<TracedGraph> graph)
      : ModuleBase(std::move(type_name)), graph_(std::move(graph)) {
    meta().graph = graph_;
  }

  TracedGraph& graph() { return *graph_; }

  /// The parameters of the leaves the graph calls that stayed children of the traced module (the
  /// rest of its graph calls them too).
  std::vector<at::Tensor> borrowed_parameters() const override {
    std::vector<at::Tensor> out;
    for (auto& leaf : graph_->called_leaves())
      if (!contains(leaf.get()))
        for (auto& [name, p] : unique_named_parameters(*leaf)) out.push_back(p);
    return out;
  }

 protected:
  Value forward(Values args) override { return graph_->run(args); }

 private:
  std::shared_ptr<TracedGraph> graph_;
};

/// Holds a wrapper's leaves along their old paths ("layer1" of "layer1.dense"), as the traced
/// module's blocks held them; the wrapper's graph calls the leaves, never the holder.
class PathHolder : public ModuleBase<PathHolder> {
 public:
  PathHolder() : ModuleBase("Module") {}

 protected:
  Value forward(Values) override {
    throw Error(fmt::format("'{}' only holds the leaves its wrapper's graph calls, and has no forward of its own",
                            schedule_path()));
  }
};

}  // namespace slapo
