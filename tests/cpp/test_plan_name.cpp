// A plan's name read back into the plan (plan/plan_name.h): every name the searches write reads
// back as the same plan at the same price; names the search did not consider are checked against
// the model and cluster and priced by Plan::pick; what does not read or hold is refused by name.
#include <doctest/doctest.h>

#include <algorithm>

#include "core/error.h"
#include "plan/inter_op.h"
#include "plan/plan_name.h"
#include "plan/planner.h"

using namespace slapo;
using namespace slapo::plan;

namespace {
Cluster synthetic(int nodes, int per_node) {
  Cluster c;
  c.nodes = nodes, c.per_node = per_node;
  c.device.name = "synthetic";
  c.device.memory_bytes = 80.0 * double(1ull << 30);
  c.device.matmul = {{"float32", 1024, 1024, 1024, 100.0}};
  c.intra_bw = 100e9, c.intra_latency = 5e-6, c.inter_bw = 10e9, c.inter_latency = 20e-6;
  return c;
}

ModelShape small_gpt2() {
  return ModelShape::from_config(ModelConfig(nlohmann::json{{"model_type", "gpt2"}, {"n_embd", 64}, {"n_layer", 4},
                                                            {"n_head", 4}, {"vocab_size", 2048}, {"n_positions", 64}}),
                                 "gpt2");
}

// The name reads back as a plan of the same name and the same estimate.
void check_reads_back(const ModelShape& model, const Cluster& cluster, const Workload& work, const Candidate& c) {
  const std::string name = c.describe();
  CAPTURE(name);
  Candidate read = parse_plan_name(name);
  CHECK(read.describe() == name);
  CHECK(read.uniform_mesh() == c.uniform_mesh());
  auto a = estimate(model, cluster, work, c), b = estimate(model, cluster, work, read);
  CHECK(b.step_s == doctest::Approx(a.step_s).epsilon(1e-12));
  CHECK(b.peak_bytes == doctest::Approx(a.peak_bytes).epsilon(1e-12));
  CHECK_NOTHROW(check_named_plan(model, cluster, work, read));
}
}  // namespace

TEST_CASE("plan name: every plan the searches write reads back as itself") {
  auto cluster = synthetic(2, 4);
  for (auto [preset, work] : {std::pair<const char*, Workload>{"gpt2-medium", {16, 512}},
                              {"llama-7b", {8, 32768}},  // cp's choices, by the ring and all-to-all
                              {"Mixtral-8x7B-v0.1", {16, 512}}}) {  // ep's
    auto model = ModelShape::from_config(ModelConfig::preset(preset), preset);
    auto grid = megatron_grid(model, cluster, work);
    REQUIRE(grid.size() > 20);
    for (auto& c : grid) check_reads_back(model, cluster, work, c);
  }
  // two nodes of 3 devices: no TP group of the grid spans two nodes (tp divides a node's devices; on
  // one node Alpa's submeshes take tp 2 of 3, which tests/cli/test_calibration.sh's plan on 1x3 runs)
  auto model_small = small_gpt2();
  Workload small_work{12, 32};
  for (auto& c : megatron_grid(model_small, synthetic(2, 3), small_work)) {
    CHECK(3 % c.tp == 0);
    check_reads_back(model_small, synthetic(2, 3), small_work, c);
  }
  // Alpa's submesh per stage, and the program over one rank layout
  auto model = small_gpt2();
  auto slow = synthetic(1, 3);
  slow.device.matmul = {{"float32", 1024, 1024, 1024, 0.05}};
  slow.intra_bw = slow.inter_bw = 0.5e9, slow.intra_latency = slow.inter_latency = 50e-6;
  for (bool uniform : {true, false}) {
    auto found = plan_inter_op(model, slow, {12, 32}, {uniform, 0});
    CHECK(found.candidate.uniform_mesh() == uniform);
    check_reads_back(model, slow, {12, 32}, found.candidate);
  }
}

TEST_CASE("plan name: Alpa's submeshes inside a node take any tp of their devices, none spanning two nodes") {
  // 2 and 3 nodes of 3 devices, each with memory for about a layer of a 4-head GPT-2: stages of tp 2
  // on 2 of a node's 3 devices (tp 3 does not divide the heads, and tp 2 does not divide a node)
  auto model = small_gpt2();
  for (int nodes : {2, 3}) {
    auto cluster = synthetic(nodes, 3);
    cluster.device.memory_bytes = 3.5 * double(1 << 20);
    cluster.device.matmul = {{"float32", 1024, 1024, 1024, 0.05}};
    cluster.intra_bw = 50e9, cluster.inter_bw = 0.05e9, cluster.intra_latency = 5e-6, cluster.inter_latency = 500e-6;
    auto found = plan_inter_op(model, cluster, {12, 32}, {false, 0});
    CAPTURE(found.candidate.describe());
    auto stages = found.candidate.resolved(static_cast<int>(model.layers));
    CHECK(std::any_of(stages.begin(), stages.end(), [](const Stage& s) { return s.tp == 2; }));
    check_reads_back(model, cluster, {12, 32}, found.candidate);  // its check: every TP group inside a node
  }
}

TEST_CASE("plan name: settings in any order; each stage's mesh and checkpointing") {
  Candidate c = parse_plan_name("  tp 2 x dp 4, zero-1, checkpoint, 4 micro ");
  CHECK(c.describe() == "tp 2 x dp 4, 4 micro, checkpoint, zero-1");
  CHECK(c.stages.empty());
  c = parse_plan_name("pp 3 on tp x dp 2x1s,1x2z,1x1 (5c+2+1 layers), 6 micro");
  REQUIRE(c.stages.size() == 3);
  CHECK(c.stages[0].tp == 2);
  CHECK(c.stages[0].sequence);
  CHECK(c.stages[0].checkpoint);
  CHECK(c.stages[1].zero);
  CHECK(c.stages[1].dp == 2);
  CHECK_FALSE(c.stages[2].checkpoint);
  CHECK(c.micro_batches == 6);
  // a table row pasted whole reads as its plan; cp 1 is no context parallelism, by any method
  CHECK(parse_plan_name("  tp 2 x dp 4, 4 micro, zero-1     0.5123   0.4000   9.9  chosen").describe() ==
        "tp 2 x dp 4, 4 micro, zero-1");
  CHECK_FALSE(parse_plan_name("tp 1 x dp 2, cp 1 all-to-all").cp_all_to_all);
  c = parse_plan_name("tp 1 x dp 2 x pp 2 (3+1c), 2 micro, zero-2");
  REQUIRE(c.stages.size() == 2);
  CHECK(c.stages[1].checkpoint);
  CHECK(c.stages[0].fully_sharded);
  CHECK(c.stages[0].keep_gathered);
  CHECK(c.uniform_mesh());
}

TEST_CASE("plan name: what does not read is refused, naming the part and the forms") {
  auto refused = [](const char* name, const char* why) {
    CAPTURE(name);
    CHECK_THROWS_WITH_AS(parse_plan_name(name), doctest::Contains(why), Error);
    CHECK_THROWS_WITH_AS(parse_plan_name(name), doctest::Contains("a plan is written as 'tp T x dp D"), Error);
  };
  refused("zero-1, tp 1 x dp 2", "'zero-1' is not how a plan begins");
  refused("tp 1 x dp 2, zero-3", "'zero-3' is not a setting");
  refused("tp 1 x dp 2, zero-1, zero-1", "'zero-1' is given twice");
  refused("tp 1 x dp 2, zero-1, fully sharded", "one or the other");
  refused("tp 1 x dp 2, ep 2, cp 2", "ep and cp are one or the other");
  refused("tp 1 x dp 2 x pp 3 (2+2), 2 micro", "pp 3 names 2 stages' layer counts");
  refused("tp 1 x dp 2 x pp 2 (2+x), 2 micro", "'x' is not a stage's layer count");
  refused("pp 2 on tp x dp 2x1,1x1 (3+1 layers), 2 micro, checkpoint", "'checkpoint' is not a setting of a plan with a mesh per stage");
  refused("pp 2 on tp x dp 2x1,1x1,1x1 (3+1 layers), 2 micro", "pp 2 names 3 meshes and 2 stages' layer counts");
  refused("pp 2 on tp x dp 2x1,1xz (3+1 layers), 2 micro", "'1xz' is not a mesh");
  refused("tp 0 x dp 2", "at least 1");
  refused("tp 1 x dp 2, 0 micro", "at least 1");
}

TEST_CASE("plan name: a named plan outside what runs is refused with the numbers") {
  auto model = small_gpt2();  // 4 layers, 4 heads
  auto cluster = synthetic(1, 4);
  Workload work{8, 32};
  auto refused = [&](const char* name, const char* why) {
    CAPTURE(name);
    CHECK_THROWS_WITH_AS(check_named_plan(model, cluster, work, parse_plan_name(name)), doctest::Contains(why), Error);
  };
  CHECK_NOTHROW(check_named_plan(model, cluster, work, parse_plan_name("pp 2 on tp x dp 1x2z,2x1 (3+1 layers), 2 micro")));
  refused("tp 1 x dp 2", "it runs on 2 devices; the cluster has 4 (1 x 4)");
  refused("tp 1 x dp 4, 3 micro", "3 micro-batches do not divide --batch 8");
  refused("tp 1 x dp 1 x pp 4 (1+1+1+2), 4 micro", "its stages hold 5 layers; gpt2 has 4");
  refused("pp 2 on tp x dp 1x1,3x1 (3+1 layers), 2 micro", "stage 1: tp 3 does not divide gpt2's 4 heads");
  refused("pp 2 on tp x dp 1x1,1x3 (3+1 layers), 2 micro", "stage 1: 3 data-parallel replicas do not divide a micro-batch of 4 rows");
  refused("pp 2 on tp x dp 1x2z,2x1z (3+1 layers), 2 micro", "stage 1: zero-1 shards over data-parallel replicas; dp is 1");
  refused("tp 1 x dp 4, ep 2", "ep 2: gpt2 has no experts");
  refused("tp 1 x dp 4, cp 2", "cp: gpt2 does not split its sequences");
  refused("tp 2 x dp 2, sequence", "sequence parallelism needs");  // Megatron's layouts priced: no pass
  // cp in pipeline stages: beside plain replicas, at any sequence length when named
  auto llama = ModelShape::from_config(ModelConfig::preset("llama-7b"), "llama-7b");
  auto eight = synthetic(2, 4);
  CHECK_NOTHROW(check_named_plan(llama, eight, {8, 1024}, parse_plan_name("tp 1 x dp 4 x pp 2 (16+16), cp 2, 2 micro")));
  CHECK_THROWS_WITH_AS(
      check_named_plan(llama, eight, {8, 1024}, parse_plan_name("tp 1 x dp 4 x pp 2 (16+16), cp 2, 2 micro, zero-1")),
      doctest::Contains("stage 0: cp in pipeline stages runs beside plain replicas"), Error);
  CHECK_THROWS_WITH_AS(check_named_plan(llama, eight, {8, 1022}, parse_plan_name("tp 1 x dp 8, cp 2")),
                       doctest::Contains("--seq 1022 is not divisible by 2 x cp (4 chunks"), Error);
  // across nodes: a TP group's ranks stay in one node
  auto two_nodes = synthetic(2, 3);
  CHECK_THROWS_WITH_AS(check_named_plan(model, two_nodes, work, parse_plan_name("tp 6 x dp 1")),
                       doctest::Contains("tp 6 spans nodes of 3 devices"), Error);
  CHECK_THROWS_WITH_AS(
      check_named_plan(model, two_nodes, work, parse_plan_name("pp 2 on tp x dp 1x2,2x2 (3+1 layers), 2 micro")),
      doctest::Contains("stage 1: the tp group of ranks 2-3 spans two nodes of 3 devices"), Error);
}

TEST_CASE("plan name: --pick prices a plan the search did not consider and writes it first") {
  auto model = small_gpt2();
  auto cluster = synthetic(1, 3);
  Workload work{12, 32};
  auto plan = plan_parallel(model, cluster, work);
  const std::string chosen = plan.chosen().candidate.describe();
  const std::string name = "pp 2 on tp x dp 1x2z,1x1 (3c+1 layers), 2 micro";
  for (auto& r : plan.ranked) REQUIRE(r.candidate.describe() != name);
  const size_t considered = plan.ranked.size();
  plan.pick("pp 2 on tp x dp 1x2z,1x1 (3c+1 layers), 2 micro");
  CHECK(plan.ranked.size() == considered + 1);
  CHECK(plan.chosen().candidate.describe() == name);
  CHECK(plan.chosen().origin == "named");
  CHECK(plan.chosen().verdict.rfind("picked, ", 0) == 0);
  auto priced = estimate(model, cluster, work, plan.chosen().candidate);
  CHECK(plan.chosen().estimate.step_s == doctest::Approx(priced.step_s));
  CHECK(plan.ranked[1].verdict == "the planner's choice");
  CHECK(plan.ranked[1].candidate.describe() == chosen);
  CHECK(plan.summary().find(name) != std::string::npos);
  // a considered plan's settings in another order pick that plan, not a copy
  plan.pick("tp 1 x dp 3, zero-1, 2 micro");
  CHECK(plan.ranked.size() == considered + 1);
  CHECK(plan.chosen().origin == "grid");
  // neither considered nor readable: both said
  CHECK_THROWS_WITH_AS(plan.pick("tp 1 x dp 3, checkpointed"), doctest::Contains("'checkpointed' is not a setting"), Error);
  CHECK_THROWS_WITH_AS(plan.pick("tp 1 x dp 3, checkpointed"), doctest::Contains("did you mean 'tp 1 x dp 3"), Error);
  // readable, but not on this cluster
  CHECK_THROWS_WITH_AS(plan.pick("tp 1 x dp 2"), doctest::Contains("it runs on 2 devices; the cluster has 3"), Error);
  CHECK_THROWS_WITH_AS(plan.pick("tp 999999 x dp 999999"),
                       doctest::Contains("tp 999999 x dp 999999 is more than the cluster's 3 devices"), Error);
  // with pins, a named plan keeps them too
  auto pinned = plan_parallel(model, cluster, work);
  Pins checkpointed;
  checkpointed.checkpoint = true;
  keep_pins(pinned, checkpointed);
  CHECK_THROWS_WITH_AS(pinned.pick("pp 2 on tp x dp 1x2z,1x1 (3+1 layers), 2 micro"),
                       doctest::Contains("does not keep the pins (checkpoint)"), Error);
  pinned.pick("pp 2 on tp x dp 1x2z,1x1 (3c+1c layers), 2 micro");
  CHECK(pinned.chosen().origin == "named");
}
