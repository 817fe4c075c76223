// Pipeline stages from C++ on one rank: the schedules' order, and split stages that chain back
// into the whole model's forward and backward.
#include <torch/torch.h>
#include <doctest/doctest.h>

#include "core/error.h"
#include "distributed/pipeline.h"
#include "distributed/world.h"
#include "error_of.h"
#include "graph/pipeline_stages.h"
#include "models/transformer_ops.h"
#include "models/zoo.h"
#include "primitives/pipeline.h"

using namespace slapo;
using dist::PipelineAction;
using dist::PipelineSchedule;

namespace {

std::string order(const std::vector<PipelineAction>& actions) {
  std::string s;
  for (auto& a : actions) s += (a.kind == PipelineAction::Forward ? "F" : "B") + std::to_string(a.micro_batch) + " ";
  return s;
}

std::shared_ptr<Module> tiny_gpt2() {
  torch::manual_seed(0);
  return build_model(ModelConfig(nlohmann::json{{"model_type", "gpt2"}, {"n_embd", 16}, {"n_layer", 4}, {"n_head", 2},
                                                {"vocab_size", 32}, {"n_positions", 16}, {"resid_pdrop", 0.0},
                                                {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}}));
}

}  // namespace

TEST_CASE("pipeline_actions: GPipe runs every forward first; 1F1B warms up by the stages after it") {
  CHECK(order(dist::pipeline_actions(PipelineSchedule::GPipe, 0, 2, 3)) == "F0 F1 F2 B0 B1 B2 ");
  CHECK(order(dist::pipeline_actions(PipelineSchedule::OneFOneB, 0, 3, 4)) == "F0 F1 F2 B0 F3 B1 B2 B3 ");
  CHECK(order(dist::pipeline_actions(PipelineSchedule::OneFOneB, 1, 3, 4)) == "F0 F1 B0 F2 B1 F3 B2 B3 ");
  CHECK(order(dist::pipeline_actions(PipelineSchedule::OneFOneB, 2, 3, 4)) == "F0 B0 F1 B1 F2 B2 F3 B3 ");
  // fewer micro-batches than the warm-up: all forwards, then all backwards
  CHECK(order(dist::pipeline_actions(PipelineSchedule::OneFOneB, 0, 4, 2)) == "F0 F1 B0 B1 ");
  CHECK_THROWS_WITH_AS(dist::parse_pipeline_schedule("zb", "build"),
                       "build: unknown pipeline schedule 'zb' (choices: \"1f1b\", \"gpipe\")", Error);
}

TEST_CASE("split_stages: the stages chained on one rank give the model's logits and gradients") {
  auto model = tiny_gpt2();
  auto sch = Schedule::create(model, dist::world());
  std::vector<std::string> cuts{"transformer.h.0", "transformer.h.2"};
  for (auto& c : cuts) cut_pipeline_stage(*sch->at(c), {"test", {}});
  CHECK(pipeline_cuts(*sch) == cuts);

  auto ids = torch::randint(0, 32, {2, 8});
  auto expected = (*model)(Values{ids}).toTensor();
  expected.sum().backward();
  auto wte_grad = model->named_parameters()["transformer.wte.weight"].grad().clone();
  model->zero_grad();

  auto leaves = pipeline_trace_leaves(*sch, cuts);
  std::vector<std::string> paths;
  for (auto& leaf : leaves) paths.push_back(leaf.path);
  CHECK(paths == std::vector<std::string>{"transformer.wte", "transformer.wpe", "transformer.drop", "transformer.h.0",
                                          "transformer.h.1", "transformer.h.2", "transformer.h.3", "transformer.ln_f",
                                          "lm_head"});
  auto traced = trace_module(*model, "the root module", {ids}, leaves);
  auto stages = split_stages(*traced, cuts, "the root module");
  REQUIRE(stages.size() == 3);
  CHECK(stages[0]->received_count() == 0);
  CHECK(stages[1]->received_count() == 1);  // the hidden state; the causal mask is recomputed
  CHECK(stages[2]->leaves() == std::vector<std::string>{"transformer.h.3", "transformer.ln_f", "lm_head"});

  std::vector<at::Tensor> carried;
  for (auto& stage : stages) carried = stage->run({ids}, carried);
  REQUIRE(carried.size() == 1);
  CHECK(torch::allclose(carried[0], expected, 1e-5, 1e-6));
  carried[0].sum().backward();
  CHECK(torch::allclose(model->named_parameters()["transformer.wte.weight"].grad(), wte_grad, 1e-5, 1e-6));
}

TEST_CASE("cut_pipeline_stage: the root, a layer list, a second cut and nested cuts are refused, leaving the log alone") {
  auto sch = Schedule::create(tiny_gpt2(), dist::world());
  CHECK(error_of([&] { cut_pipeline_stage(*sch, {"test", {}}); }).find("the root module cannot end a stage") !=
        std::string::npos);
  CHECK(error_of([&] { cut_pipeline_stage(*sch->at("transformer.h"), {"test", {}}); })
            .find("'transformer.h' is a ModuleList, which its parent never calls as a whole") != std::string::npos);
  cut_pipeline_stage(*sch->at("transformer.h.1.mlp"), {"test", {}});
  CHECK(error_of([&] { cut_pipeline_stage(*sch->at("transformer.h.1.mlp"), {"test", {}}); })
            .find("'transformer.h.1.mlp' already ends a stage") != std::string::npos);
  CHECK(error_of([&] { cut_pipeline_stage(*sch->at("transformer.h.1"), {"test", {}}); })
            .find("contains 'transformer.h.1.mlp', which already ends a stage") != std::string::npos);
  CHECK(error_of([&] { cut_pipeline_stage(*sch->at("transformer.h.1.mlp.c_fc"), {"test", {}}); })
            .find("is inside 'transformer.h.1.mlp'") != std::string::npos);
  CHECK(sch->log().size() == 1);
}

TEST_CASE("Pipeline: stages beyond the group's ranks become interleaved chunks") {
  auto sch = Schedule::create(tiny_gpt2(), dist::world());
  cut_pipeline_stage(*sch->at("transformer.h.1"), {"test", {}});
  Pipeline pipe(sch, PipelineOptions{});  // one rank, two stages: two chunks on it
  CHECK(pipe.runner().chunks() == 2);
  CHECK(pipe.describe().find("pipeline of 2 stages on 1 ranks, 2 chunks each") != std::string::npos);
  // and it computes the model's loss: one rank runs both chunks in turn
  auto ids = torch::randint(0, 32, {2, 8});
  double expected = causal_lm_loss((*sch->mod())(Values{ids}).toTensor(), ids).item<double>();
  CHECK(pipe.step({ids}, ids) == doctest::Approx(expected).epsilon(1e-5));
}

TEST_CASE("pipeline_actions: interleaved 1F1B warms up by 2 (p - r - 1) + (v - 1) p forwards") {
  // 2 ranks, 2 chunks, 4 micro-batches: rank 0 runs 4 warm-up forwards, rank 1 two
  CHECK(order(dist::pipeline_actions(PipelineSchedule::OneFOneB, 1, 2, 4, 2)) ==
        "F0 F1 F0 B0 F1 B1 F2 B0 F3 B1 F2 B2 F3 B3 B2 B3 ");
  auto rank0 = dist::pipeline_actions(PipelineSchedule::OneFOneB, 0, 2, 4, 2);
  REQUIRE(rank0.size() == 16);
  CHECK(rank0[3].kind == dist::PipelineAction::Forward);
  CHECK(rank0[4].kind == dist::PipelineAction::Forward);
  CHECK(rank0[5].kind == dist::PipelineAction::Backward);
  CHECK((rank0[5].chunk == 1 && rank0[5].micro_batch == 0));  // the last chunk's backward comes first
}
