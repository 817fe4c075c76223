// The planner's cost model and its grid of uniform plans, on a synthetic device and on the measured
// H100 profile the program ships (stdlib/devices/h100.json).
#include <doctest/doctest.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>

#include "core/data_dirs.h"
#include "core/error.h"
#include "plan/inter_op.h"
#include "plan/layer_layouts.h"
#include "plan/pins.h"
#include "plan/planner.h"

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
// Where the program looks for named profiles ($SLAPO_DEVICES honoured); the H100's must be there.
std::string h100_devices_dir() {
  std::string dir = devices_dir();
  REQUIRE_MESSAGE(std::filesystem::exists(dir + "/h100.json"), "no h100.json in " << dir);
  return dir;
}
}  // namespace

TEST_CASE("plan: the cost model counts the model's parameters as the zoo builds them") {
  // the matmul weights (biases, norms and position embeddings left out): within 1% of the zoo's count
  CHECK(gpt2("gpt2").total_params == 12 * (4 * 768 * 768 + 2 * 768 * 3072) + 50257 * 768);
  CHECK(gpt2("gpt2").total_params == doctest::Approx(124439808).epsilon(0.01));
  auto llama = ModelShape::from_config(ModelConfig::preset("TinyLlama-1.1B"), "TinyLlama-1.1B");
  CHECK(llama.kv_heads == 4);
  CHECK(llama.gated_mlp);
}

TEST_CASE("plan: T5 and ALBERT are priced as the zoo builds them, and planned as one stage") {
  auto shape = [](const char* preset) { return ModelShape::from_config(ModelConfig::preset(preset), preset); };
  // the zoo's counts (transformers' for t5-small and t5-v1_1-small); biases, norms and positions left out
  CHECK(shape("t5-small").total_params == doctest::Approx(60506624).epsilon(0.01));
  CHECK(shape("t5-v1_1-small").total_params == doctest::Approx(76961152).epsilon(0.01));  // gated, untied head
  CHECK(shape("albert-base-v2").total_params == doctest::Approx(11221680).epsilon(0.02));
  CHECK(shape("albert-xxlarge-v2").total_params == doctest::Approx(206368944).epsilon(0.02));
  // ALBERT: twelve calls of one shared layer hold one layer's parameters, and fully sharded, each
  // call gathers that whole layer
  auto albert = shape("albert-base-v2");
  CHECK(albert.layers == 12);
  CHECK(albert.gathered_params == doctest::Approx(12.0 * albert.layer_params).epsilon(0.001));
  // T5's decoder layers run a cross-attention too: more time, all-reduces and activations a layer
  auto t5 = shape("t5-small");
  CHECK(t5.layers == 12);
  CHECK(t5.attention_blocks == doctest::Approx(1.5));
  auto encoder_only = t5;
  encoder_only.attention_blocks = 1;
  auto cluster = synthetic(1, 8, 80);
  auto with = layer_costs(t5, cluster, {8, 512}, 8, 2, 1, false);
  auto without = layer_costs(encoder_only, cluster, {8, 512}, 8, 2, 1, false);
  CHECK(with.layer_fwd_s > without.layer_fwd_s);
  CHECK(with.layer_activation_bytes > without.layer_activation_bytes);
  CHECK(with.forward_all_reduces == doctest::Approx(2.5));
  CHECK(with.backward_all_reduces == doctest::Approx(3.0));
  // neither is cut into pipeline stages, whatever the devices, and a pin that cuts says why
  for (auto* model : {&t5, &albert}) {
    auto plan = plan_parallel(*model, synthetic(2, 4, 1), {64, 512});
    for (auto& r : plan.ranked) CHECK_MESSAGE(r.candidate.pp() == 1, r.candidate.describe());
    CHECK(plan.summary().find("one stage: ") != std::string::npos);
  }
  Pins cut;
  cut.stage_layers = {6, 6};
  CHECK_THROWS_WITH_AS(cut.check(t5), doctest::Contains("cut t5-small into a pipeline, and it runs as one stage: T5's decoder"),
                       Error);
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

namespace {
// A layout every mesh answers the same: what a pass that keeps every projection whole returns.
struct FixedLayouts : LayerLayouts {
  TpLayout layout;
  TpLayout on(int, int, bool) const override { return layout; }
};
}  // namespace

TEST_CASE("plan: the layer layouts price tensor parallelism: Megatron's by default, or the pass's") {
  ModelShape model = gpt2("gpt2-medium");
  const Workload work{8, 512};
  const Cluster cluster = synthetic(1, 2, 80);
  const Estimate megatron = estimate(model, cluster, work, {2, 1, false, false}),
                 one = estimate(model, cluster, work, {1, 2, false, false});
  // Megatron's activations: sbh(10 + 24/t + 5as/(ht)), so less than half at t = 2 but more than
  // the whole over 2
  auto megatron_costs = layer_costs(model, cluster, work, 8, 2, 1);
  auto whole_costs = layer_costs(model, cluster, work, 8, 1, 1);
  CHECK(megatron_costs.layer_activation_bytes > whole_costs.layer_activation_bytes / 2);
  CHECK(megatron_costs.layer_activation_bytes < whole_costs.layer_activation_bytes * 0.6);

  auto replicated = std::make_shared<FixedLayouts>();
  replicated->layout = {0, 0, 0, 0, 0};
  model.layouts = replicated;
  auto kept_whole = estimate(model, cluster, work, {2, 1, false, false});
  CHECK(kept_whole.tp_comm_s == 0);
  CHECK(kept_whole.compute_s > megatron.compute_s);
  CHECK(kept_whole.param_bytes > megatron.param_bytes);
  auto kept_costs = layer_costs(model, cluster, work, 8, 2, 1);
  CHECK(kept_costs.layer_fwd_s == doctest::Approx(layer_costs(model, cluster, work, 8, 1, 1).layer_fwd_s));
  CHECK(kept_costs.layer_activation_bytes == doctest::Approx(whole_costs.layer_activation_bytes));
  // one rank's data-parallel twin computes on half the batch: the replicated layer is slower
  CHECK(kept_whole.compute_s > one.compute_s);
  // the all-reduces it names are what the step pays, once more for a checkpointed layer's forward
  auto counted = std::make_shared<FixedLayouts>();
  counted->layout = {1, 1, -1, 3, 1};
  model.layouts = counted;
  auto three = estimate(model, cluster, work, {2, 1, false, false});
  CHECK(three.tp_comm_s == doctest::Approx(megatron.tp_comm_s));  // 3 + 1 = 2 + 2
  auto three_ckpt = estimate(model, cluster, work, {2, 1, true, false});
  model.layouts = nullptr;
  auto megatron_ckpt = estimate(model, cluster, work, {2, 1, true, false});
  CHECK(three_ckpt.tp_comm_s == doctest::Approx(megatron_ckpt.tp_comm_s * 7.0 / 6.0));
}

TEST_CASE("plan: the intra-op pass on one traced GPT-2 layer prices Megatron's layout where it pays") {
  auto config = ModelConfig::preset("gpt2-medium");
  auto model = ModelShape::from_config(config, "gpt2-medium");
  Workload work{8, 512};
  auto pricing = price_layers("ilp", config, model, synthetic(1, 4, 80), work);
  REQUIRE(pricing.layouts);
  CHECK(pricing.note.empty());
  for (int tp : {2, 4}) {
    TpLayout l = pricing.layouts->on(tp, 1, false);
    CHECK(l.split_compute == doctest::Approx(1.0));
    CHECK(l.split_params == doctest::Approx(1.0));
    CHECK(l.forward_all_reduces == doctest::Approx(2.0));   // after attention's and the MLP's row projections
    CHECK(l.backward_all_reduces == doctest::Approx(2.0));  // before c_attn and c_fc
    // the saved tensors the heads split, attention's scores grown to 512 x 512: near Megatron's
    // (24 + 5as/h) / (34 + 5as/h) = 0.86
    CHECK(l.split_activations == doctest::Approx(0.86).epsilon(0.08));
  }
  // sequence parallelism: the layer's tokens split between its projections. The norms, dropouts
  // and residual adds then keep a tp-th of their tensors, so more of the saved activations divide;
  // the forward moves the same volume as Megatron's two all-reduces, in gathers and reduce-scatters
  model.layouts = pricing.layouts;
  CHECK(model.sequence_parallel_on(2, 512));
  CHECK_FALSE(model.sequence_parallel_on(2, 511));  // the ranks must divide the sequence
  for (int tp : {2, 4}) {
    TpLayout whole = pricing.layouts->on(tp, 1, false), split = pricing.layouts->on(tp, 1, true);
    CHECK(split.split_activations > whole.split_activations + 0.05);
    CHECK(split.forward_all_reduces + split.backward_all_reduces <= 4.0 + 1e-9);
    auto sp = layer_costs(model, synthetic(1, 4, 80), work, 8, tp, 1, true);
    auto mp = layer_costs(model, synthetic(1, 4, 80), work, 8, tp, 1, false);
    CHECK(sp.layer_activation_bytes < mp.layer_activation_bytes);
  }
  // Megatron's pricing traces nothing; one device per node has no tensor parallelism to price
  CHECK_FALSE(price_layers("megatron", config, model, synthetic(1, 4, 80), work).layouts);
  CHECK_FALSE(price_layers("ilp", config, model, synthetic(4, 1, 80), work).layouts);
}

TEST_CASE("plan: picks the fastest plan that fits and explains the others") {
  auto model = gpt2("gpt2-medium");
  // ample memory: data parallelism wins (no per-layer communication)
  auto roomy = plan_uniform(model, synthetic(1, 4, 80), {16, 512});
  CHECK(roomy.chosen().candidate.dp == 4);
  CHECK(roomy.chosen().verdict == "chosen");
  // tp 1, 2, 4 (dividing 16 heads) x checkpoint x (none, ZeRO-1, ZeRO-2, fully sharded: those with dp > 1)
  CHECK(roomy.ranked.size() == 8 + 8 + 2);
  for (size_t i = 2; i < roomy.ranked.size(); ++i)
    if (roomy.ranked[i].estimate.fits) CHECK(roomy.ranked[i - 1].estimate.step_s <= roomy.ranked[i].estimate.step_s);
  // little memory: only sharded or checkpointed plans fit
  auto tight = plan_uniform(model, synthetic(1, 4, 6), {16, 512});
  auto& c = tight.chosen().candidate;
  CHECK((c.tp > 1 || c.checkpoint || c.zero || c.fully_sharded));
  CHECK(tight.chosen().estimate.peak_bytes <= 0.9 * 6 * double(1ull << 30));
  // deterministic: the same inputs give the same ranking (the scripts: tests/plan/golden)
  auto again = plan_uniform(model, synthetic(1, 4, 6), {16, 512});
  REQUIRE(again.ranked.size() == tight.ranked.size());
  for (size_t i = 0; i < again.ranked.size(); ++i) {
    CHECK(again.ranked[i].candidate.describe() == tight.ranked[i].candidate.describe());
    CHECK(again.ranked[i].estimate.step_s == tight.ranked[i].estimate.step_s);
  }
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
  std::string dir = h100_devices_dir();
  auto cluster = Cluster::parse("1x8:h100", dir);
  CHECK(cluster.device.matmul.size() > 10);
  CHECK(cluster.device.matmul_seconds(2048, 4096, 4096, "float32") > cluster.device.matmul_seconds(2048, 4096, 4096, "bfloat16"));
  auto p = plan_uniform(gpt2("gpt2-large"), cluster, {64, 1024});
  CHECK(p.chosen().estimate.fits);
  CHECK(p.chosen().estimate.step_s > 0);
}

TEST_CASE("plan: a 1F1B pipeline costs every stage once and the slowest once per further micro-batch") {
  auto model = gpt2("gpt2-medium");
  auto cluster = synthetic(1, 4, 80);
  Workload work{16, 512};
  Candidate c{1, 1, false, false, 8, {{12, 1, 1, false, false}, {4, 1, 1, false, false}, {4, 1, 1, false, false},
                                       {4, 1, 1, false, false}}};
  auto e = estimate(model, cluster, work, c);
  REQUIRE(e.stages.size() == 4);
  double sum = 0, slowest = 0;
  for (auto& s : e.stages) sum += s.time_s(), slowest = std::max(slowest, s.time_s());
  CHECK(slowest == doctest::Approx(e.stages[0].time_s()));  // 12 layers and the embedding
  CHECK(e.step_s == doctest::Approx(sum + 7 * slowest + e.dp_comm_s + e.optimizer_s));
  CHECK(e.p2p_s > 0);
  CHECK(e.stages[3].p2p_s == 0);  // the last stage sends nothing on
  // 1F1B: the first stage keeps 4 micro-batches in flight, the last one
  CHECK(e.stages[1].activation_bytes > e.stages[2].activation_bytes);
  // the same stages as one stage and gradient accumulation: 8 micro-batches one after another
  auto whole = estimate(model, cluster, work, {1, 4, false, false, 8, {}});
  auto once = estimate(model, cluster, work, {1, 4, false, false, 1, {}});
  CHECK(whole.compute_s == doctest::Approx(once.compute_s).epsilon(0.05));  // smaller matmuls, same FLOPs
  CHECK(whole.activation_bytes < once.activation_bytes / 4);
  // bf16: half the activations, a float32 master copy in the optimizer
  Workload bf16{16, 512, "bfloat16"};
  cluster.device.matmul.push_back({"bfloat16", 1024, 1024, 1024, 400.0});
  auto half = estimate(model, cluster, bf16, {1, 4, false, false, 1, {}});
  CHECK(half.activation_bytes == doctest::Approx(once.activation_bytes / 2));
  CHECK(half.optimizer_bytes == doctest::Approx(once.optimizer_bytes * 1.5));
  CHECK(half.compute_s < once.compute_s / 3);
}

namespace {
// Every way of cutting `layers` into `stages` contiguous non-empty stages, each checkpointed or not.
void every_split(int layers, int stages, std::vector<Stage> prefix, const Stage& mesh,
                 const std::function<void(const std::vector<Stage>&)>& visit) {
  if (stages == 1) {
    for (bool ckpt : {false, true}) {
      auto all = prefix;
      all.push_back({layers, mesh.tp, mesh.dp, ckpt, mesh.zero});
      visit(all);
    }
    return;
  }
  for (int first = 1; first <= layers - stages + 1; ++first)
    for (bool ckpt : {false, true}) {
      auto next = prefix;
      next.push_back({first, mesh.tp, mesh.dp, ckpt, mesh.zero});
      every_split(layers - first, stages - 1, next, mesh, visit);
    }
}
}  // namespace

TEST_CASE("plan: the inter-op program finds the best pipeline of one rank layout (against brute force)") {
  // 6 layers on 4 devices: every layout, stage split, checkpointing and micro-batch count, estimated
  auto config = ModelConfig::preset("gpt2-medium");
  auto model = ModelShape::from_config(config.with_defaults("gpt2"), "gpt2-medium");
  model.layers = 6;
  model.total_params = model.layers * model.layer_params + model.embedding_params;
  for (double gib : {80.0, 3.0, 1.6}) {
    auto cluster = synthetic(1, 4, gib);
    Workload work{16, 512};
    double brute = std::numeric_limits<double>::infinity();
    for (int tp : {1, 2, 4})
      for (int pp : {1, 2, 4}) {
        if (tp * pp > 4) continue;
        int dp = 4 / tp / pp;
        for (int micro : micro_batch_choices(work.batch)) {
          if ((work.batch / micro) % dp != 0) continue;
          for (bool zero : {false, true}) {
            if (zero && dp == 1) continue;
            every_split(6, pp, {}, {0, tp, dp, false, zero}, [&](const std::vector<Stage>& stages) {
              Candidate c{tp, dp, false, zero, micro, pp > 1 ? stages : std::vector<Stage>{}};
              c.checkpoint = stages[0].checkpoint;
              auto e = estimate(model, cluster, work, c);
              if (e.fits) brute = std::min(brute, e.step_s);
            });
          }
        }
      }
    CAPTURE(gib);
    auto found = plan_inter_op(model, cluster, work, {true, 0});
    CHECK(found.estimate.fits);
    CHECK(found.estimate.step_s == doctest::Approx(brute).epsilon(1e-9));
    // it is never slower than Megatron's uniform grid under the same model
    for (auto& c : megatron_grid(model, cluster, work)) {
      auto e = estimate(model, cluster, work, c);
      if (e.fits) CHECK(found.estimate.step_s <= e.step_s * (1 + 1e-9));
    }
  }
}

TEST_CASE("plan: uneven stages pay off when the last stage holds a large LM head") {
  // GPT-2's 50257-token head is as much work as several layers: the planner gives its stage fewer
  auto model = gpt2("gpt2");
  auto cluster = synthetic(1, 2, 80);
  cluster.intra_bw = 10e9;  // slower links: tensor parallelism's all-reduces lose to a pipeline
  auto plan = plan_parallel(model, cluster, {8, 256});
  auto& best = plan.chosen();
  CHECK(best.origin == "inter-op");
  REQUIRE(best.candidate.pp() == 2);
  CHECK(best.candidate.stages[0].layers > best.candidate.stages[1].layers);
  for (auto& r : plan.ranked)
    if (r.origin == "grid" && r.estimate.fits) CHECK(best.estimate.step_s < r.estimate.step_s);
  // without pipelines the same search keeps one stage
  auto flat = plan_parallel(model, cluster, {8, 256}, {1, false});
  CHECK(flat.chosen().candidate.pp() == 1);
}

TEST_CASE("plan: Alpa's unrestricted program and the GPT-3 presets on simulated H100s") {
  std::string dir = h100_devices_dir();
  auto cluster = Cluster::parse("2x8:h100", dir);
  auto model = gpt2("gpt3-6.7b");
  CHECK(model.total_params == doctest::Approx(6.65e9).epsilon(0.02));
  Workload work{256, 2048, "bfloat16"};
  auto any = plan_inter_op(model, cluster, work, {false, 0});
  CHECK(any.estimate.fits);
  CHECK(any.candidate.devices() == 16);
  auto plan = plan_parallel(model, cluster, work);
  CHECK(plan.chosen().estimate.step_s <= any.estimate.step_s * (1 + 1e-9));
  CHECK_THROWS_WITH_AS(plan_parallel(model, Cluster::parse("1x1:h100", dir), {256, 2048, "bfloat16"}),
                       doctest::Contains("does not fit 1 x 1"), Error);
  CHECK_THROWS_WITH_AS(plan_parallel(model, cluster, {256, 2048, "float16"}),
                       doctest::Contains("--dtype 'float16' is not a training precision"), Error);
}

TEST_CASE("plan: Alpa's stages on meshes of their own are chosen when fastest") {
  // A small GPT-2 on 3 slow devices with slow links: one rank layout runs dp 3 or 3 stages of a rank,
  // while a submesh per stage runs 2 layers on one rank and 2 on two replicas, which is faster
  auto model = ModelShape::from_config(
      ModelConfig(nlohmann::json{{"model_type", "gpt2"}, {"n_embd", 64}, {"n_layer", 4}, {"n_head", 4},
                                 {"vocab_size", 2048}, {"n_positions", 64}}),
      "gpt2");
  auto cluster = synthetic(1, 3, 8);
  cluster.device.matmul = {{"float32", 1024, 1024, 1024, 0.05}};
  cluster.intra_bw = cluster.inter_bw = 0.5e9, cluster.intra_latency = cluster.inter_latency = 50e-6;
  auto plan = plan_parallel(model, cluster, {12, 32});
  REQUIRE(!plan.unrestricted.empty());
  const Ranked& alpa = plan.unrestricted.front();
  bool ranked = false;
  for (auto& r : plan.ranked) ranked |= r.candidate.describe() == alpa.candidate.describe();
  CHECK(ranked);  // Alpa's plan competes with the others
  CHECK(plan.chosen().estimate.step_s <= alpa.estimate.step_s * (1 + 1e-9));
  CHECK(plan.chosen().origin == "alpa");
  const Candidate& c = plan.chosen().candidate;
  REQUIRE(c.pp() > 1);
  CHECK_FALSE(c.uniform_mesh());
  // a search's name picks its plan
  plan.pick("grid");
  CHECK(plan.chosen().origin == "grid");
  plan.pick("alpa");
  CHECK(plan.chosen().candidate.describe() == alpa.candidate.describe());
  CHECK_THROWS_WITH_AS(plan.pick("gird"), doctest::Contains("did you mean 'grid"), Error);
}

TEST_CASE("plan: fully sharded gathers are prefetched behind the layer before, and the reduce-scatters run beside it") {
  // the first unit's collective in full, each other's excess over what the compute before it hides
  CHECK(exposed_prefetched(2.0, 5.0, 4, 1.0) == doctest::Approx(2.0));
  CHECK(exposed_prefetched(2.0, 5.0, 4, 0.0) == doctest::Approx(8.0));
  CHECK(exposed_prefetched(2.0, 1.0, 4, 0.5) == doctest::Approx(2.0 + 3 * 1.5));
  CHECK(exposed_prefetched(2.0, 1.0, 0, 1.0) == 0.0);

  auto model = gpt2("gpt2-medium");
  Workload work{16, 512};
  auto cluster = synthetic(1, 4, 80);
  cluster.intra_bw = 400e9;  // a layer's gather shorter than its forward
  const Candidate fully{1, 4, false, false, 2, {}, false, true}, kept{1, 4, false, false, 2, {}, false, true, true};
  auto at = [&](double overlap, const Candidate& c) {
    cluster.overlap = overlap;
    return estimate(model, cluster, work, c);
  };
  // nothing hidden: every layer's two gathers and reduce-scatter (half an all-reduce each on a GPU),
  // and the root's, every micro-batch
  auto costs = layer_costs(model, cluster, work, 8, 1, 4);
  auto layer_bytes = [&](double params) { return all_reduce_seconds(params * 4.0, 4, 400e9, 5e-6); };
  const double per_micro = 24 * 1.5 * layer_bytes(model.layer_params) + 1.5 * layer_bytes(model.embedding_params);
  CHECK(at(0.0, fully).dp_comm_s == doctest::Approx(2 * per_micro));
  // hidden entirely (each layer's gather is shorter than a layer's forward here, a gather and a
  // reduce-scatter shorter than its backward): the first layer's forward gather, the first backward
  // gather and the last reduce-scatter, and the root's collectives remain
  REQUIRE(0.5 * layer_bytes(model.layer_params) < costs.overhead * costs.layer_fwd_s);
  REQUIRE(layer_bytes(model.layer_params) < 2 * costs.overhead * costs.layer_fwd_s);
  const double hidden = 2 * (3 * 0.5 * layer_bytes(model.layer_params) + 1.5 * layer_bytes(model.embedding_params));
  CHECK(at(1.0, fully).dp_comm_s == doctest::Approx(hidden));
  CHECK(at(0.5, fully).dp_comm_s <= at(0.0, fully).dp_comm_s);
  CHECK(at(0.5, fully).dp_comm_s >= at(1.0, fully).dp_comm_s);
  // ZeRO-2 gathers once a call: its forward gathers and its reduce-scatters hide, all but the first of each
  CHECK(at(0.0, kept).dp_comm_s - at(1.0, kept).dp_comm_s ==
        doctest::Approx(2 * 23 * (0.5 + 0.5) * layer_bytes(model.layer_params)));
  // memory and compute are not what overlap changes
  CHECK(at(1.0, fully).peak_bytes == at(0.0, fully).peak_bytes);
  CHECK(at(1.0, fully).compute_s == at(0.0, fully).compute_s);
  // plain data parallelism averages after backward: nothing of it hides
  const Candidate plain{1, 4, false, false, 2, {}, false, false};
  CHECK(at(1.0, plain).dp_comm_s == at(0.0, plain).dp_comm_s);
}

TEST_CASE("plan: a profile's links.overlap is a fraction; GPUs assume NCCL hides all, CPUs nothing") {
  auto dir = h100_devices_dir();
  CHECK(Cluster::parse("1x8:h100", dir).overlap == 1.0);
  auto tmp = std::filesystem::temp_directory_path() / "slapo_overlap_profile";
  std::filesystem::create_directories(tmp);
  auto write = [&](const char* name, const char* links) {
    std::ofstream(tmp / name) << R"j({"device": "cpu (1 threads)", "matmul": [{"dtype": "float32", "m": 64, "k": 64, )j"
                              << R"j("n": 64, "tflops": 0.1}], "links": )j" << links << "}";
    return (tmp / name).string();
  };
  CHECK(Cluster::parse("1x2:" + write("a.json", R"({"overlap": 0.25})"), dir).overlap == 0.25);
  CHECK(Cluster::parse("1x2:" + write("b.json", R"({"intra_GBps": 1})"), dir).overlap == 0.0);
  CHECK_THROWS_WITH(Cluster::parse("1x2:" + write("c.json", R"({"overlap": 1.5})"), dir),
                    doctest::Contains("links.overlap 1.5"));
  std::filesystem::remove_all(tmp);
}

TEST_CASE("plan: stages that differ only in sequence parallelism are not one rank layout") {
  // one `plan.sequence` runs a one-layout pipeline: a stage that alone splits its tokens needs the
  // meshes form, and must not pass for (and be dropped as) the grid's plan of the same name
  Candidate c{2, 2, false, true, 8, {}, false};
  c.stages = {{6, 2, 2, false, true, false}, {6, 2, 2, false, true, true}};
  CHECK_FALSE(c.uniform_mesh());
  CHECK(c.describe() == "pp 2 on tp x dp 2x2z,2x2sz (6+6 layers), 8 micro");
  c.stages[0].sequence = true, c.sequence = true;
  CHECK(c.uniform_mesh());
  CHECK(c.describe() == "tp 2 x dp 2 x pp 2 (6+6), 8 micro, sequence, zero-1");
}

TEST_CASE("plan: fully sharded pipeline stages shard their layers, not the root's embedding, and pay per micro-batch") {
  auto model = gpt2("gpt2-medium");
  auto cluster = synthetic(1, 4, 80);
  Workload work{16, 512};
  auto two_stages = [](bool fully) {
    Candidate c{1, 2, false, false, 4, {}, false, fully};
    c.stages = {{12, 1, 2, false, false, false, fully}, {12, 1, 2, false, false, false, fully}};
    return c;
  };
  auto plain = estimate(model, cluster, work, two_stages(false));
  auto fully = estimate(model, cluster, work, two_stages(true));
  CHECK(two_stages(true).uniform_mesh());
  CHECK(two_stages(true).describe() == "tp 1 x dp 2 x pp 2 (12+12), 4 micro, fully sharded");
  for (int s = 0; s < 2; ++s) {
    const auto &p = plain.stages[s], &f = fully.stages[s];
    const double layers = 12.0 * model.layer_params * 8.0, embedding = model.embedding_params * 8.0;  // float32 + grad
    // half of the layers and two whole layers, the embedding (or head) whole
    CHECK(f.param_bytes == doctest::Approx(layers / 2 + 2.0 * model.layer_params * 8.0 + embedding));
    CHECK(p.param_bytes == doctest::Approx(layers + embedding));
    CHECK(f.optimizer_bytes == doctest::Approx((layers / 2 + embedding) * p.optimizer_bytes / (layers + embedding)));
    // the layers gathered and reduce-scattered every micro-batch, the embedding averaged once
    CHECK(f.sync_s > 4 * p.sync_s * 0.9);
  }
  // a one-stage fully sharded plan shards the embedding too
  auto one = estimate(model, cluster, work, {1, 4, false, false, 4, {}, false, true});
  const double all = (24.0 * model.layer_params + model.embedding_params) * 8.0;
  CHECK(one.param_bytes == doctest::Approx(all / 4 + 2.0 * model.layer_params * 8.0));
  // kept gathered (ZeRO-2): every weight whole, a quarter of the gradients; one gather and one
  // reduce-scatter a micro-batch (one all-reduce's volume), where ZeRO-3 gathers twice
  auto zero2 = estimate(model, cluster, work, {1, 4, false, false, 4, {}, false, true, true});
  CHECK(zero2.param_bytes == doctest::Approx(all / 2 + (all / 4 + 2.0 * model.layer_params * 8.0) / 2));
  CHECK(zero2.optimizer_bytes == doctest::Approx(one.optimizer_bytes));
  CHECK(zero2.dp_comm_s == doctest::Approx(one.dp_comm_s / 1.5));
  Candidate named{1, 4, false, false, 4, {}, false, true, true};
  CHECK(named.describe() == "tp 1 x dp 4, 4 micro, zero-2");
  // Megatron's grid offers fully sharded pipelines
  bool offered = false;
  for (auto& c : megatron_grid(model, cluster, work)) offered = offered || (c.fully_sharded && c.pp() > 1);
  CHECK(offered);
}

TEST_CASE("plan: a mixture of experts spreads its experts over ep replicas: 1/ep of their memory, all-to-all") {
  auto mixtral = ModelShape::from_config(ModelConfig::preset("Mixtral-8x7B-v0.1"), "Mixtral-8x7B-v0.1");
  CHECK(mixtral.experts == 8);
  CHECK(mixtral.experts_per_token == 2);
  CHECK(mixtral.total_params == doctest::Approx(46.7e9).epsilon(0.005));  // Mistral AI's count
  CHECK(mixtral.expert_params == 8 * 3 * 4096 * 14336);
  auto cluster = synthetic(2, 4, 10000);
  Workload work{16, 512};
  Candidate whole{1, 8}, spread{1, 8};
  spread.ep = 4;
  auto a = estimate(mixtral, cluster, work, whole), b = estimate(mixtral, cluster, work, spread);
  // each rank holds 2 of the 8 experts (weights and gradients, float32: 8 bytes a parameter)
  CHECK(a.param_bytes - b.param_bytes == doctest::Approx(32.0 * mixtral.expert_params * 0.75 * 8));
  CHECK(a.ep_comm_s == 0);
  CHECK(b.ep_comm_s > 0);
  CHECK(b.dp_comm_s < a.dp_comm_s);  // the experts averaged over the 2 replicas holding them, not 8
  // the same work on every rank (the synthetic device runs every shape alike): k experts a token
  CHECK(b.compute_s == doctest::Approx(a.compute_s));
  // checkpointing recomputes the forward exchanges
  spread.checkpoint = true;
  CHECK(estimate(mixtral, cluster, work, spread).ep_comm_s == doctest::Approx(1.5 * b.ep_comm_s));
  // ZeRO-1 slices the dense moments over the 8 replicas and the experts' over the 2 holding them
  spread.checkpoint = false;
  auto zero = spread;
  zero.zero = true;
  auto z = estimate(mixtral, cluster, work, zero);
  const double per_param = optimizer_bytes_per_param(work), held = b.optimizer_bytes / per_param;
  const double experts_held = 32.0 * mixtral.expert_params / 4;  // this rank's experts (2 of 8)
  CHECK(z.optimizer_bytes == doctest::Approx(((held - experts_held) / 8 + experts_held / 2) * per_param));
  // the grid: ep dividing the replicas and the experts, TP dividing the experts' width, ZeRO-1 with
  // ep on one stage; pipelines with spread experts in every stage run plain replicas
  bool some_ep = false, zero_ep = false, staged_ep = false;
  for (auto& c : megatron_grid(mixtral, cluster, work)) {
    CHECK(c.dp % c.ep == 0);
    CHECK(8 % c.ep == 0);
    CHECK(14336 % c.tp == 0);
    some_ep = some_ep || c.ep == 8;
    zero_ep = zero_ep || (c.zero && c.ep > 1);
    if (c.pp() > 1 && c.ep > 1) {
      staged_ep = true;
      CHECK_FALSE(c.zero);
      CHECK_FALSE(c.fully_sharded);
      for (auto& s : c.stages) CHECK(s.ep == c.ep);
    }
  }
  CHECK(some_ep);
  CHECK(zero_ep);
  CHECK(staged_ep);
  // two stages, each with half the layers and its experts over 2 of its 4 replicas: half the
  // all-to-alls a micro-batch on each stage, and 1/ep of the experts a rank
  Candidate staged{1, 4}, staged_whole{1, 4};
  staged.ep = 2, staged.micro_batches = staged_whole.micro_batches = 4;
  staged.stages = {{16, 1, 4}, {16, 1, 4}};
  staged_whole.stages = staged.stages;
  for (auto& s : staged.stages) s.ep = 2;
  CHECK(staged.uniform_mesh());
  CHECK(staged.describe() == "tp 1 x dp 4 x pp 2 (16+16), ep 2, 4 micro");
  auto p = estimate(mixtral, cluster, work, staged), q = estimate(mixtral, cluster, work, staged_whole);
  CHECK(p.ep_comm_s > 0);
  CHECK(q.ep_comm_s == 0);
  CHECK(q.param_bytes - p.param_bytes == doctest::Approx(16.0 * mixtral.expert_params * 0.5 * 8));
  // a dense model's plans have no ep
  for (auto& c : megatron_grid(gpt2("gpt2"), cluster, work)) CHECK(c.ep == 1);
  // Mixtral-8x7B on 8 x 8 H100s: expert parallelism is chosen, as people train it (without it, fully
  // sharding gathers every expert over all 64 ranks, and TP over a node leaves too much per rank)
  auto plan = plan_parallel(mixtral, Cluster::parse("8x8:h100", h100_devices_dir()), {256, 4096, "bfloat16"});
  CHECK_MESSAGE(plan.chosen().candidate.ep > 1, plan.summary());
  CHECK(plan.summary().find("ep comm") != std::string::npos);
  CHECK(plan.summary().find("experts: 8 a layer, 2 a token") != std::string::npos);
}

TEST_CASE("plan: long sequences split over cp replicas: a causal share of attention, no scores kept, exchanges priced") {
  auto llama = ModelShape::from_config(ModelConfig::preset("llama-7b"), "llama-7b");
  CHECK(llama.context_parallel);
  CHECK_FALSE(gpt2("gpt2").context_parallel);  // attn_pdrop 0.1: ring attention applies no dropout
  auto cluster = synthetic(2, 4, 80);
  Workload work{8, 32768};
  Candidate whole{1, 8}, split{1, 8};
  split.cp = 4;
  auto a = estimate(llama, cluster, work, whole), b = estimate(llama, cluster, work, split);
  // a row's worth of tokens a rank either way (8 replicas of a row, or 2 of 4 rows split 4 ways):
  // the projections alike, attention about half (the ring leaves the hidden pieces out)
  CHECK(b.compute_s < a.compute_s);
  CHECK(b.activation_bytes < a.activation_bytes / 10);  // no s x s scores kept
  CHECK(a.p2p_s == 0);
  cluster.overlap = 0;  // nothing hidden: the ring's exchanges are paid in full
  auto exposed = estimate(llama, cluster, work, split);
  CHECK(exposed.p2p_s > 0);
  // (cp - 1) steps a pass, over the node's link (tp 1 x cp 4 fits in a node of 4): forward sends the
  // block's keys and values, backward them and their gradients
  const double block = 8.0 * 32768 / 8 * 2 * 4096 * 4;  // this rank's tokens x k and v x width x float32
  CHECK(exposed.p2p_s == doctest::Approx(32 * 3 * (2 * cluster.intra_latency + 3 * block / cluster.intra_bw)));
  // Ulysses: the same attention work; each pass one all-to-all of q, k, v and the output (LLaMA-7B's
  // 32 key/value heads divide over cp 4: unrepeated), 3/4 of it off the rank, never hidden
  auto ulysses = split;
  ulysses.cp_all_to_all = true;
  CHECK(ulysses.describe() == "tp 1 x dp 8, cp 4 all-to-all");
  auto u = estimate(llama, cluster, work, ulysses);
  CHECK(u.compute_s == doctest::Approx(exposed.compute_s));
  CHECK(u.activation_bytes == doctest::Approx(exposed.activation_bytes));
  const double sent = 8.0 * 32768 / 8 * 4096 * 4;  // this rank's tokens x width x float32, each of q, k, v, out
  CHECK(u.p2p_s == doctest::Approx(32 * 2 * 4 * all_to_all_seconds(sent, 4, cluster.intra_bw, cluster.intra_latency)));
  // the grid: cp only for long sequences, dividing dp (beside sequence parallelism where the model's
  // layout has it: tests/plan/golden/llama7b_8x8_h100_bf16_128k.lua); ZeRO and fully_shard over every
  // replica; all-to-all where a rank's heads divide over cp
  // In pipeline stages cp runs beside plain replicas (the pipeline's dp_group averages the cp ranks'
  // parts), every stage split alike, named so
  bool some_cp = false, some_all_to_all = false, some_sharded = false, some_staged = false;
  for (auto& c : megatron_grid(llama, cluster, work)) {
    if (c.cp == 1) {
      CHECK_FALSE(c.cp_all_to_all);
      continue;
    }
    some_cp = true;
    some_all_to_all = some_all_to_all || c.cp_all_to_all;
    CHECK(c.dp % c.cp == 0);
    if (c.sequence) CHECK((work.seq / c.cp) % c.tp == 0);  // each cp rank's tokens split over its tp ranks
    some_sharded = some_sharded || c.zero || c.fully_sharded;
    if (c.cp_all_to_all) CHECK((32 / c.tp) % c.cp == 0);
    if (c.pp() > 1) {
      some_staged = true;
      CHECK_FALSE((c.zero || c.fully_sharded || c.sequence));
      for (auto& st : c.stages) CHECK((st.cp == c.cp && st.cp_all_to_all == c.cp_all_to_all));
      CHECK(c.uniform_mesh());
      CHECK(c.describe().find(fmt::format(", cp {}", c.cp)) != std::string::npos);
    }
  }
  CHECK(some_cp);
  CHECK(some_all_to_all);
  CHECK(some_sharded);
  CHECK(some_staged);
  // a stage's share of the sequence crosses its cut: the boundary is the rank's tokens, not the rows'
  Candidate staged{1, 4, false, false, 1}, split_stages = staged;
  staged.stages = {Stage{16, 1, 4}, Stage{16, 1, 4}};
  split_stages.cp = 2;
  split_stages.stages = {Stage{16, 1, 4}, Stage{16, 1, 4}};
  for (auto& st : split_stages.stages) st.cp = 2;
  CHECK(split_stages.describe() == "tp 1 x dp 4 x pp 2 (16+16), cp 2, 1 micro");
  auto whole_staged = estimate(llama, cluster, work, staged), split_staged = estimate(llama, cluster, work, split_stages);
  CHECK(split_staged.activation_bytes < whole_staged.activation_bytes / 10);  // no s x s scores kept
  CHECK(split_staged.p2p_s > whole_staged.p2p_s);                            // the ring's exchanges besides the cut's
  for (auto& c : megatron_grid(llama, cluster, {8, 4096})) CHECK(c.cp == 1);
  // packed documents: the pieces between them left out under cp (about (piece + document) / seq of the
  // scores, piece = seq / 2cp), nothing saved without cp, and nothing else priced differently
  Workload packed = work;
  packed.documents = 2048;
  auto d = estimate(llama, cluster, packed, split), w = estimate(llama, cluster, packed, whole);
  CHECK(d.compute_s < exposed.compute_s);
  CHECK(w.compute_s == doctest::Approx(a.compute_s));
  CHECK(d.activation_bytes == doctest::Approx(exposed.activation_bytes));
  CHECK(d.p2p_s == doctest::Approx(exposed.p2p_s));
  packed.documents = 32768;  // one document a row: the causal half, as without documents
  CHECK(estimate(llama, cluster, packed, split).compute_s == doctest::Approx(exposed.compute_s));
  packed.documents = 40000;
  CHECK_THROWS_WITH(plan_parallel(llama, cluster, packed),
                    doctest::Contains("--documents 40000 is not a document length within a row of --seq 32768"));
  // LLaMA-7B at 128k tokens on 8 x 8 H100s: the sequences split, as people train long contexts
  auto plan = plan_parallel(llama, Cluster::parse("8x8:h100", h100_devices_dir()), {16, 131072, "bfloat16"});
  CHECK_MESSAGE(plan.chosen().candidate.cp > 1, plan.summary());
  CHECK(plan.chosen().estimate.fits);
}
