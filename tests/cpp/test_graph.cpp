// Traced graphs from C++: the fused LayerNorm tail reads its dropout's state when it runs, also
// after LibTorch's optimiser has had the graph.
#include <torch/torch.h>
#include <doctest/doctest.h>

#include "distributed/world.h"
#include "graph/traced_graph.h"
#include "models/zoo.h"
#include "primitives/primitives.h"

using namespace slapo;

TEST_CASE("fuse: the LayerNorm tail follows train/eval after constant propagation") {
  torch::manual_seed(0);
  auto model = build_model(ModelConfig(nlohmann::json{
      {"model_type", "bert"}, {"hidden_size", 16}, {"num_hidden_layers", 1}, {"num_attention_heads", 2},
      {"intermediate_size", 32}, {"vocab_size", 32}, {"max_position_embeddings", 16}, {"hidden_dropout_prob", 0.5}}));
  auto sch = Schedule::create(model, dist::world());
  auto& output = *sch->at("bert.encoder.layer.0.output");
  decompose(*output.at("dense"), {"test", {}});
  trace(output, Values{torch::randn({2, 4, 32}), torch::randn({2, 4, 16})}, {}, /*flatten=*/true, {"test", {}});
  CHECK(fuse(output, "kernels", {"test", {}}) == 1);
  auto& graph = *output.mod()->meta().graph;
  graph.optimize_torchscript();  // constant propagation must not freeze the train/eval switch
  CHECK(graph.str().find("slapo::leaf_dropout") != std::string::npos);

  Values inputs{torch::randn({2, 4, 32}), torch::randn({2, 4, 16})};
  model->eval();
  CHECK(torch::equal(graph.run(inputs).toTensor(), graph.run(inputs).toTensor()));
  model->train();
  CHECK_FALSE(torch::equal(graph.run(inputs).toTensor(), graph.run(inputs).toTensor()));
}
