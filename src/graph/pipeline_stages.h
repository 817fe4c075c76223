// A traced module's graph split into pipeline stages at the leaf calls that end a stage.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "graph/traced_graph.h"

namespace slapo {

/// Where one input of a stage's graph comes from.
struct StageInput {
  enum Kind { Received, ModelInput, Param } kind;
  int index;  ///< into the received tensors, the model's inputs, or TracedGraph::params()
};

class StageGraph {
 public:
  StageGraph(int index, std::shared_ptr<torch::jit::Graph> graph, std::vector<StageInput> inputs,
             std::vector<at::Tensor> params, int received, int sent, std::vector<std::string> leaves);
  ~StageGraph();

  /// Runs the stage on the whole model's inputs (it reads those it uses) and the previous stage's
  /// tensors. Returns the tensors for the next stage, or the model's output on the last stage.
  std::vector<at::Tensor> run(const Values& model_inputs, const std::vector<at::Tensor>& received);

  int index() const { return index_; }
  int received_count() const { return received_; }
  int sent_count() const { return sent_; }
  /// Paths (below the traced module) of the leaves it calls.
  const std::vector<std::string>& leaves() const { return leaves_; }
  /// The traced module's parameters that this stage's own ops read (not through a leaf).
  std::vector<at::Tensor> direct_params() const;
  std::string str() const;

 private:
  int index_;
  std::shared_ptr<torch::jit::Graph> graph_;
  std::vector<StageInput> inputs_;
  std::vector<at::Tensor> params_;
  int received_, sent_;
  std::vector<std::string> leaves_;
  std::unique_ptr<torch::jit::GraphFunction> function_;
};

/// Splits `traced` after each call of a leaf in `cut_after` (paths below the traced module): n cuts
/// give n + 1 stages, in graph order. A stage sends the next one every tensor a later stage still
/// needs (passing on what it does not use); values computed from constants and model inputs
/// alone (positions, masks) are recomputed where used instead. Raises naming `where` when a cut
/// is not a leaf called exactly once, or when a non-tensor value would cross a cut.
std::vector<std::shared_ptr<StageGraph>> split_stages(const TracedGraph& traced, const std::vector<std::string>& cut_after,
                                                      const std::string& where);

}  // namespace slapo
