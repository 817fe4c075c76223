// A module whose forward is a graph cut out of a trace: what checkpoint(subgraph) and
// fuse(subgraph) put in the subgraph's place.
#pragma once

#include <memory>
#include <string>

#include "core/module.h"
#include "graph/traced_graph.h"

namespace slapo {

class GraphModule : public ModuleBase<GraphModule> {
 public:
  GraphModule(std::string type_name, std::shared_ptr<TracedGraph> graph)
      : ModuleBase(std::move(type_name)), graph_(std::move(graph)) {}

  TracedGraph& graph() { return *graph_; }

  /// The parameters of the leaves the graph calls (they stay children of the traced module).
  std::vector<at::Tensor> borrowed_parameters() const override {
    std::vector<at::Tensor> out;
    for (auto& leaf : graph_->called_leaves())
      for (auto& [name, p] : unique_named_parameters(*leaf)) out.push_back(p);
    return out;
  }

 protected:
  Value forward(Values args) override { return graph_->run(args); }

 private:
  std::shared_ptr<TracedGraph> graph_;
};

}  // namespace slapo
