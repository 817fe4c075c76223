// The planner's cost model and its grid of uniform plans, on a synthetic device and on the H100
// profile measured for ../shared/devices.
#include <doctest/doctest.h>

#include <filesystem>

#include "core/error.h"
#include "plan/planner.h"
#include "slapo/build_config.h"

using namespace slapo;
using namespace slapo::plan;

namespace {
// A device of 100 TFLOP/s at every shape, `gib` of memory, 100 GB/s links.
Cluster synthetic(int nodes, int per_node, double gib) {
  Cluster c;
  c.nodes = nodes, c.per_node = per_node;
  c.device.name = "synthetic";
  c.device.memory_bytes = gib * double(1ull << 30);
  c.device.matmul = {{"float32", 1024, 1024, 1024, 100.0}};
  c.intra_bw = 100e9, c.intra_latency = 5e-6, c.inter_bw = 10e9, c.inter_latency = 20e-6;
  return c;
}
ModelShape gpt2(const char* preset) { return ModelShape::from_config(ModelConfig::preset(preset), preset); }
}  // namespace

TEST_CASE("plan: the cost model counts the model's parameters as the zoo builds them") {
  // the matmul weights (biases, norms and position embeddings left out): within 1% of the zoo's count
  CHECK(gpt2("gpt2").total_params == 12 * (4 * 768 * 768 + 2 * 768 * 3072) + 50257 * 768);
  CHECK(gpt2("gpt2").total_params == doctest::Approx(124439808).epsilon(0.01));
  auto llama = ModelShape::from_config(ModelConfig::preset("TinyLlama-1.1B"), "TinyLlama-1.1B");
  CHECK(llama.kv_heads == 4);
  CHECK(llama.gated_mlp);
}

TEST_CASE("plan: tensor parallelism divides weights and activations; checkpointing trades time for memory") {
  auto model = gpt2("gpt2-medium");
  auto cluster = synthetic(1, 4, 80);
  Workload work{8, 512};
  auto one = estimate(model, cluster, work, {1, 4, false, false});
  auto tp4 = estimate(model, cluster, work, {4, 1, false, false});
  CHECK(tp4.param_bytes < one.param_bytes / 2);  // the 50257-row embedding stays whole (not divisible by 4)
  CHECK(tp4.tp_comm_s > 0);
  CHECK(one.tp_comm_s == 0);
  CHECK(one.dp_comm_s > 0);
  auto ckpt = estimate(model, cluster, work, {1, 4, true, false});
  CHECK(ckpt.activation_bytes < one.activation_bytes / 3);
  CHECK(ckpt.compute_s > one.compute_s);
  auto zero = estimate(model, cluster, work, {1, 4, false, true});
  CHECK(zero.optimizer_bytes == doctest::Approx(one.optimizer_bytes / 4));
}

TEST_CASE("plan: picks the fastest plan that fits and explains the others") {
  auto model = gpt2("gpt2-medium");
  // ample memory: data parallelism wins (no per-layer communication)
  auto roomy = plan_uniform(model, synthetic(1, 4, 80), {16, 512});
  CHECK(roomy.chosen().candidate.dp == 4);
  CHECK(roomy.chosen().verdict == "chosen");
  CHECK(roomy.ranked.size() == 4 + 4 + 2);  // tp 1, 2, 4 (dividing 16 heads) x checkpoint x zero (with dp > 1)
  for (size_t i = 2; i < roomy.ranked.size(); ++i)
    if (roomy.ranked[i].estimate.fits) CHECK(roomy.ranked[i - 1].estimate.step_s <= roomy.ranked[i].estimate.step_s);
  // little memory: only sharded or checkpointed plans fit
  auto tight = plan_uniform(model, synthetic(1, 4, 6), {16, 512});
  auto& c = tight.chosen().candidate;
  CHECK((c.tp > 1 || c.checkpoint || c.zero));
  CHECK(tight.chosen().estimate.peak_bytes <= 0.9 * 6 * double(1ull << 30));
  // deterministic: the same inputs give the same script
  CHECK(plan_uniform(model, synthetic(1, 4, 6), {16, 512}).lua_source(3) == tight.lua_source(3));
  CHECK(tight.lua_source(3).find("require(\"slapo.schedules.gpt2\")") != std::string::npos);
}

TEST_CASE("plan: refuses what cannot work, naming the option") {
  auto model = gpt2("gpt2-large");
  CHECK_THROWS_WITH_AS(plan_uniform(model, synthetic(1, 2, 1), {8, 1024}),
                       doctest::Contains("does not fit 1 x 2"), Error);
  CHECK_THROWS_WITH_AS(plan_uniform(gpt2("gpt2"), synthetic(1, 7, 80), {8, 128}),
                       doctest::Contains("must divide --batch 8"), Error);
  CHECK_THROWS_WITH_AS(Cluster::parse("2:cpu", "."), doctest::Contains("is not NODESxDEVICES:DEVICE"), Error);
  CHECK_THROWS_WITH_AS(Cluster::parse("1x2:tpu9", "/nonexistent"), doctest::Contains("names a device with no profile"),
                       Error);
}

TEST_CASE("plan: an H100 cluster from the measured profile plans GPT-2 large on 8 GPUs") {
  std::string dir = std::string(SLAPO_SOURCE_STDLIB_DIR) + "/../../shared/devices";
  if (!std::filesystem::exists(dir + "/h100.json")) {
    MESSAGE("no ../shared/devices/h100.json beside the checkout");
    return;
  }
  auto cluster = Cluster::parse("1x8:h100", dir);
  CHECK(cluster.device.matmul.size() > 10);
  CHECK(cluster.device.matmul_seconds(2048, 4096, 4096, "float32") > cluster.device.matmul_seconds(2048, 4096, 4096, "bfloat16"));
  auto p = plan_uniform(gpt2("gpt2-large"), cluster, {64, 1024});
  CHECK(p.chosen().estimate.fits);
  CHECK(p.chosen().estimate.step_s > 0);
}
