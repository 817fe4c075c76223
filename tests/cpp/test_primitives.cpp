// Primitives from C++ on a one-rank world: effects, checks, and that a failure changes nothing.
#include <torch/torch.h>
#include <doctest/doctest.h>

#include "core/error.h"
#include "distributed/world.h"
#include "error_of.h"
#include "models/layers.h"
#include "models/zoo.h"
#include "primitives/primitives.h"
#include "primitives/verify.h"

using namespace slapo;

namespace {
std::shared_ptr<Module> tiny_mlp() {
  torch::manual_seed(0);
  return build_model(ModelConfig(nlohmann::json{{"model_type", "mlp"}, {"hidden_size", 8}, {"intermediate_size", 16}}));
}
}  // namespace

TEST_CASE("shard: a refused shard leaves the parameter, its metadata and the log as they were") {
  auto sch = Schedule::create(tiny_mlp(), dist::world());
  auto fc1 = sch->at("fc1");
  at::Tensor before = fc1->mod()->param("weight").clone();
  CHECK(error_of([&] { shard(*fc1, "weight", 5, {"test", {}}); }).find("axis 5 is out of range") != std::string::npos);
  CHECK(error_of([&] { shard(*fc1, "weight", 0, {"test", {}}, 3); }).find("into 3 sections") != std::string::npos);
  CHECK(torch::equal(before, fc1->mod()->param("weight")));
  CHECK(fc1->mod()->meta().shards.empty());
  CHECK(sch->log().size() == 0);
}

TEST_CASE("shard: groups split each section and regroup restores the full tensor") {
  ShardSpec spec{0, {12, 2}, 2, 1, 3};
  auto full = torch::arange(24, at::kFloat).view({12, 2});
  auto local = spec.local(full);
  CHECK(local.size(0) == 6);
  CHECK(torch::equal(local.narrow(0, 0, 2), full.narrow(0, 2, 2)));   // section 0, part 1
  CHECK(torch::equal(local.narrow(0, 2, 2), full.narrow(0, 6, 2)));   // section 1, part 1
  ShardSpec rank0 = spec;
  rank0.rank = 0;
  CHECK(torch::equal(spec.regroup(at::cat({rank0.local(full), local}, 0)), full));
}

TEST_CASE("fully_shard's split: a first axis the parts do not divide goes as torch.chunk, padded for collectives") {
  at::Tensor full = torch::arange(7 * 2).reshape({7, 2});
  std::vector<at::Tensor> padded;
  for (int rank = 0; rank < 3; ++rank) {
    ShardSpec spec{0, {7, 2}, 3, rank, 1};
    CHECK(spec.part_stride() == 3);
    at::Tensor local = spec.local(full);
    CHECK(local.size(0) == std::vector<int64_t>{3, 3, 1}[rank]);
    CHECK(torch::equal(local, full.narrow(0, 3 * rank, local.size(0))));
    padded.push_back(spec.padded(local));
    CHECK(padded.back().size(0) == 3);
  }
  CHECK(torch::equal(padded[2].narrow(0, 1, 2), torch::zeros({2, 2}, full.options())));
  ShardSpec any{0, {7, 2}, 3, 0, 1};
  CHECK(torch::equal(any.regroup(at::cat(padded, 0)), full));
  // sections each split alike: 3 sections of 5 rows over 2 ranks hold 3 + 2 rows of each
  at::Tensor fused = torch::arange(15).reshape({15, 1});
  std::vector<at::Tensor> parts;
  for (int rank = 0; rank < 2; ++rank) {
    ShardSpec spec{0, {15, 1}, 2, rank, 3};
    at::Tensor local = spec.local(fused);
    CHECK(local.size(0) == 3 * spec.part_size(rank));
    parts.push_back(spec.padded(local));
  }
  CHECK(torch::equal(ShardSpec{0, {15, 1}, 2, 0, 3}.regroup(at::cat(parts, 0)), fused));
}

TEST_CASE("replace: the parent's slot and the schedule follow the new module") {
  auto model = tiny_mlp();
  auto sch = Schedule::create(model, dist::world());
  auto identity = std::make_shared<Identity>();
  replace(*sch->at("act"), identity, {"test", {"args[1]"}});
  CHECK(model->child("act") == identity);
  CHECK(sch->at("act")->mod() == identity);
  auto x = torch::randn({2, 8});
  auto expected = at::linear(at::linear(x, model->child("fc1")->param("weight"), model->child("fc1")->param("bias")),
                             model->child("fc2")->param("weight"), model->child("fc2")->param("bias"));
  CHECK(torch::allclose((*model)(x), expected));
  CHECK(sch->log().to_lua().find("sch[\"act\"]:replace(args[1])  -- test") != std::string::npos);
}

TEST_CASE("sync: parse errors list the valid choices") {
  auto sch = Schedule::create(tiny_mlp(), dist::world());
  CHECK(error_of([&] { parse_sync_mode("fwd", *sch); }) ==
        "sync: unknown mode 'fwd' for the root module (choices: fwd_pre, fwd_post, bwd_post, bwd_params)");
  CHECK(error_of([&] { parse_sync_op("RS->XX", 0, *sch); }).find("schemes: RR->RR, RR->RS") != std::string::npos);
}

TEST_CASE("build: init_weights re-initialises from the seed, the same every time") {
  auto a = Schedule::create(tiny_mlp(), dist::world());
  auto b = Schedule::create(tiny_mlp(), dist::world());
  torch::manual_seed(123);  // disturb the default stream between the two builds
  ScheduleBuildOptions all;
  all.init = ScheduleBuildOptions::All;
  all.seed = 7;
  build(*a, all);
  build(*b, all);
  CHECK(torch::equal(a->mod()->child("fc1")->param("weight"), b->mod()->child("fc1")->param("weight")));
  CHECK_FALSE(torch::equal(a->mod()->child("fc1")->param("weight"), tiny_mlp()->child("fc1")->param("weight")));
  CHECK(a->mod()->child("fc1")->param("bias").abs().sum().item<double>() == 0.0);  // HF: zero biases
}
