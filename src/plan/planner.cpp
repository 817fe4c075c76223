// The searches combined and ranked, a pick among them, the planner's table, and the one entry
// point that does all of it for a request.
#include "plan/planner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <optional>
#include <set>

#include "core/data_dirs.h"
#include "core/error.h"
#include "io/json_file.h"
#include "plan/inter_op.h"
#include "plan/layer_layouts.h"
#include "plan/plan_name.h"

namespace slapo::plan {

void check_workload(const Workload& work) {
  if (work.batch < 1 || work.seq < 1)
    throw Error(fmt::format("plan: --batch and --seq must be >= 1, got {} and {}", work.batch, work.seq));
  if (work.documents < 0 || work.documents > work.seq)
    throw Error(fmt::format("plan: --documents {} is not a document length within a row of --seq {} tokens (0: each "
                            "row one sequence)", work.documents, work.seq));
  if (work.dtype != "float32" && work.dtype != "bfloat16")
    throw Error(fmt::format("plan: --dtype '{}' is not a training precision (choices: float32, bfloat16)", work.dtype));
}

void check_positions(const ModelConfig& config, const ModelShape& model, const Workload& work) {
  const char* key = model.type == "gpt2" ? "n_positions"
                    : model.type == "bert" || model.type == "roberta" || model.type == "gpt_neo" || model.type == "opt" ? "max_position_embeddings"
                                                                                             : nullptr;
  if (!key) return;
  int64_t positions = config.with_defaults(model.type).integer(key);
  if (work.seq > positions)
    throw Error(fmt::format("plan: --seq {} is longer than {}'s {} learned positions ({}); plan for --seq {} or less",
                            work.seq, model.name, positions, key, positions));
}

namespace {

Plan empty_plan(const ModelShape& model, const Cluster& cluster, const Workload& work) {
  Plan plan;
  plan.model = model, plan.cluster = cluster, plan.work = work;
  plan.model_source = model.name;
  return plan;
}

void check_some_layout(const Plan& plan) {
  if (!plan.ranked.empty()) return;
  const ModelShape& model = plan.model;
  throw Error(fmt::format("plan: no layout of {} devices fits: tensor parallelism must divide {} heads ({} key/value "
                          "heads) within a node of {}, and data parallelism must divide --batch {}",
                          plan.cluster.devices(), model.heads, model.kv_heads, plan.cluster.per_node, plan.work.batch));
}

// Memory at its own scale: "72.0 GiB", and "4.33 MiB" for the small models of tests and examples.
std::string memory_text(double bytes) {
  return bytes >= double(1ull << 30) ? fmt::format("{:.1f} GiB", to_gib(bytes))
                                     : fmt::format("{:.2f} MiB", bytes / double(1 << 20));
}

// Why a plan is not `best`: the memory it needs where it does not fit, else how much slower (or faster,
// a plan named by hand) it is.
std::string verdict_against(const Estimate& e, const Estimate& best, const Cluster& cluster) {
  if (!e.fits)
    return fmt::format("needs {} of {}", memory_text(e.peak_bytes),
                       memory_text(kUsableMemory * cluster.device.memory_bytes));
  const double ratio = e.step_s / best.step_s;
  return ratio >= 1 ? fmt::format("{:.0f}% slower", 100.0 * (ratio - 1.0))
                    : fmt::format("{:.0f}% faster", 100.0 * (1.0 / ratio - 1.0));
}

// Fitting plans first, fastest first (ties keep the earlier, simpler plan); the best must fit.
void rank_and_explain(Plan& plan) {
  const ModelShape& model = plan.model;
  const Cluster& cluster = plan.cluster;
  std::stable_sort(plan.ranked.begin(), plan.ranked.end(), [](const Ranked& a, const Ranked& b) {
    if (a.estimate.fits != b.estimate.fits) return a.estimate.fits;
    if (!a.estimate.fits) return a.estimate.peak_bytes < b.estimate.peak_bytes;
    return a.estimate.step_s < b.estimate.step_s;
  });
  const Ranked& best = plan.ranked.front();
  const double usable = kUsableMemory * cluster.device.memory_bytes;
  if (!best.estimate.fits)
    throw Error(fmt::format("plan: {} ({:.1f}M parameters) does not fit {} x {}: the most sharded plan ({}) needs "
                            "{} per device, {} more than the {} usable",
                            model.name, model.total_params / 1e6, cluster.nodes, cluster.per_node,
                            best.candidate.describe(), memory_text(best.estimate.peak_bytes),
                            memory_text(best.estimate.peak_bytes - usable), memory_text(usable)));
  for (auto& r : plan.ranked) {
    r.verdict = &r == &plan.ranked.front() ? "chosen" : verdict_against(r.estimate, best.estimate, cluster);
  }
}

}  // namespace

Plan plan_uniform(const ModelShape& model, const Cluster& cluster, const Workload& work) {
  check_workload(work);
  Plan plan = empty_plan(model, cluster, work);
  for (auto& c : megatron_grid(model, cluster, work))
    if (c.pp() == 1 && c.micro_batches == 1) plan.ranked.push_back({c, estimate(model, cluster, work, c), ""});
  check_some_layout(plan);
  rank_and_explain(plan);
  return plan;
}

Plan plan_parallel(const ModelShape& model, const Cluster& cluster, const Workload& work, const SearchOptions& asked) {
  auto start = std::chrono::steady_clock::now();
  check_workload(work);
  Plan plan = empty_plan(model, cluster, work);
  if (asked.max_stages < 0)
    throw Error(fmt::format("plan: --max-stages must be >= 0 (0: no limit), got {}", asked.max_stages));
  SearchOptions options = asked;
  if (!model.one_stage_reason.empty()) options.max_stages = 1;  // no cuts (ModelShape says why)
  for (auto& c : megatron_grid(model, cluster, work))
    if (options.max_stages == 0 || c.pp() <= options.max_stages)
      plan.ranked.push_back({c, estimate(model, cluster, work, c), ""});
  check_some_layout(plan);
  // the dynamic program over one rank layout: stages of their own sizes and checkpointing (a
  // mixture of experts with its experts spread over ep replicas in every stage). Alpa's submesh per
  // stage is not offered for a mixture of experts: slapo.build refuses spread experts on stage meshes
  if (model.experts > 0) options.unrestricted = false;
  try {
    auto found = plan_inter_op(model, cluster, work, {true, options.max_stages});
    std::string name = found.candidate.describe();
    bool known = std::any_of(plan.ranked.begin(), plan.ranked.end(),
                             [&](const Ranked& r) { return r.candidate.describe() == name; });
    if (!known) plan.ranked.push_back({found.candidate, found.estimate, "", "inter-op"});
  } catch (const Error&) {
    // nothing fits: the grid's most sharded plan says by how much
  }
  // Alpa's program, a submesh per stage: a candidate like the others (stages on meshes of their
  // own run through slapo.parallel.stage_layout), and reported beside the chosen plan
  std::optional<InterOpResult> alpa;
  if (options.unrestricted) {
    try {
      alpa = plan_inter_op(model, cluster, work, {false, options.max_stages});
      std::string name = alpa->candidate.describe();
      bool known = std::any_of(plan.ranked.begin(), plan.ranked.end(),
                               [&](const Ranked& r) { return r.candidate.describe() == name; });
      if (!known) plan.ranked.push_back({alpa->candidate, alpa->estimate, "", "alpa"});
    } catch (const Error&) {
    }
  }
  rank_and_explain(plan);
  if (alpa) {
    double ratio = alpa->estimate.step_s / plan.chosen().estimate.step_s;
    std::string verdict =
        alpa->candidate.describe() == plan.chosen().candidate.describe() ? "the same as the chosen plan"
                                                                       : fmt::format("{:.0f}% slower (a submesh per "
                                                                                     "stage)", 100.0 * (ratio - 1.0));
    plan.unrestricted.push_back({alpa->candidate, alpa->estimate, verdict, "alpa"});
  }
  plan.search_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return plan;
}

void keep_pins(Plan& plan, const Pins& pins) {
  pins.check(plan.model);
  const int layers = static_cast<int>(plan.model.layers);
  const std::vector<Candidate> grid = megatron_grid(plan.model, plan.cluster, plan.work);
  std::vector<Ranked> kept;
  std::set<std::string> seen;
  auto keep = [&](Ranked r) {
    if (seen.insert(r.candidate.describe()).second) kept.push_back(std::move(r));
  };
  // the search's own plans first (the inter-op program's stages among them), then the grid's
  // reshaped to the pinned stages and their checkpointing
  for (const auto& r : plan.ranked)
    if (pins.kept_by(r.candidate, layers)) keep(r);
  for (const auto& c : grid)
    if (auto r = pins.reshape(c, layers)) keep({*r, estimate(plan.model, plan.cluster, plan.work, *r), ""});
  if (kept.empty()) {
    std::set<int> tps, pps;
    for (const auto& c : grid) tps.insert(c.tp), pps.insert(c.pp());
    throw Error(fmt::format("plan: no layout of {} devices keeps the pins ({}): its plans have tp {} and pp {}, "
                            "data parallelism dividing --batch {}",
                            plan.cluster.devices(), pins.describe(), fmt::join(tps, ", "), fmt::join(pps, ", "),
                            plan.work.batch));
  }
  Ranked unpinned = plan.chosen();
  plan.ranked = std::move(kept);
  try {
    rank_and_explain(plan);
  } catch (const Error& e) {
    std::string why = e.what();
    if (why.rfind("plan: ", 0) == 0) why.erase(0, 6);
    throw Error(fmt::format("plan: keeping the pins ({}): {}", pins.describe(), why));
  }
  const double ratio = plan.chosen().estimate.step_s / unpinned.estimate.step_s;
  if (unpinned.candidate.describe() == plan.chosen().candidate.describe())
    unpinned.verdict = "the same: the pins cost nothing";
  else if (ratio >= 1)
    unpinned.verdict = fmt::format("without the pins; keeping them costs {:.0f}%", 100.0 * (ratio - 1.0));
  else
    unpinned.verdict = fmt::format("without the pins; {:.0f}% slower", 100.0 * (1.0 / ratio - 1.0));
  // Alpa's plan beside them, against the plan that keeps the pins now
  for (auto& r : plan.unrestricted) {
    const double against = r.estimate.step_s / plan.chosen().estimate.step_s;
    if (r.candidate.describe() == plan.chosen().candidate.describe()) r.verdict = "the same as the chosen plan";
    else r.verdict = fmt::format("{:.0f}% {} (a submesh per stage{})", 100.0 * std::abs(against - 1.0),
                            against >= 1 ? "slower" : "faster", pins.kept_by(r.candidate, layers) ? "" : "; not pinned");
  }
  plan.pins = pins.describe();
  plan.kept = pins;
  plan.unpinned = std::move(unpinned);
}

void Plan::pick(const std::string& name) {
  // a search's name picks its plan: Alpa's program's, or the fastest of the others' that fits
  std::string description = name;
  if (name == "alpa" && !unrestricted.empty()) description = unrestricted.front().candidate.describe();
  if (name == "grid" || name == "inter-op") {
    auto found = std::find_if(ranked.begin(), ranked.end(),
                              [&](const Ranked& r) { return r.origin == name && r.estimate.fits; });
    if (found == ranked.end())
      throw Error(fmt::format("plan: --pick '{}': that search found no plan that fits of its own", name));
    description = found->candidate.describe();
  }
  auto considered = [&](const std::string& wanted) {
    return std::find_if(ranked.begin(), ranked.end(), [&](const Ranked& r) { return r.candidate.describe() == wanted; });
  };
  auto it = considered(description);
  if (it == ranked.end()) {
    // a plan the search did not consider, written as the table writes plans: priced here
    Candidate named;
    try {
      named = parse_plan_name(description);
    } catch (const Error& e) {
      std::vector<std::string> names = {"grid", "inter-op", "alpa"};
      for (auto& r : ranked) names.push_back(r.candidate.describe());
      auto close = closest_names(description, names);
      std::string why = e.what();
      const std::string prefix = fmt::format("plan: --pick '{}': ", description);
      if (why.rfind(prefix, 0) == 0) why.erase(0, prefix.size());
      throw Error(fmt::format("plan: --pick '{}' names no plan considered{} (the table's first column, e.g. '{}', or a "
                              "search: grid, inter-op, alpa), nor reads as a plan of its own: {}",
                              description, close.empty() ? "" : fmt::format("; did you mean '{}'?", close[0]),
                              names[3], why));
    }
    description = named.describe();  // the settings in the table's order
    it = considered(description);
    if (it == ranked.end()) {
      check_named_plan(model, cluster, work, named);
      if (kept.any() && !kept.kept_by(named, static_cast<int>(model.layers)))
        throw Error(fmt::format("plan: --pick '{}' does not keep the pins ({}): name a plan that does, or plan "
                                "without them",
                                description, pins));
      Estimate priced = estimate(model, cluster, work, named);
      std::string verdict = verdict_against(priced, ranked.front().estimate, cluster);
      ranked.push_back({std::move(named), std::move(priced), std::move(verdict), "named"});
      it = ranked.end() - 1;
    }
  }
  if (!it->estimate.fits)
    throw Error(fmt::format("plan: --pick '{}' does not fit: {}", description, it->verdict));
  ranked.front().verdict = "the planner's choice";
  it->verdict = it == ranked.begin() ? "chosen" : "picked, " + it->verdict;
  std::rotate(ranked.begin(), it, it + 1);
}

std::string Plan::summary() const {
  std::string out = fmt::format("plan for {} ({:.1f}M parameters) on {} x {} {}, batch {} x seq {}{}{}\n", model.name,
                                model.total_params / 1e6, cluster.nodes, cluster.per_node, cluster.device.name,
                                work.batch, work.seq, work.dtype == "float32" ? "" : ", " + work.dtype,
                                work.documents ? fmt::format(", packed documents of {} tokens", work.documents) : "");
  // the best dozen, then a count of the rest; the name column as wide as the longest name shown
  const size_t shown = std::min<size_t>(ranked.size(), 12);
  size_t width = 52;
  auto widen = [&](const Ranked& r) { width = std::max(width, r.candidate.describe().size()); };
  std::for_each(ranked.begin(), ranked.begin() + static_cast<std::ptrdiff_t>(shown), widen);
  std::for_each(unrestricted.begin(), unrestricted.end(), widen);
  if (unpinned) widen(*unpinned);
  // a mixture of experts' all-to-all in a column of its own (where a dense model's p2p would be)
  const bool experts = model.experts > 0;
  out += fmt::format("  {:<{}} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}  {}\n", "plan", width, "step s", "compute",
                     "tp comm", experts ? "ep comm" : "p2p", "dp comm", "optim", "GiB/rank", "");
  auto row = [&](const Ranked& r) {
    return fmt::format("  {:<{}} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.4f} {:>9.2f}  {}{}\n",
                       r.candidate.describe(), width, r.estimate.step_s, r.estimate.compute_s, r.estimate.tp_comm_s,
                       experts ? r.estimate.ep_comm_s : r.estimate.p2p_s, r.estimate.dp_comm_s,
                       r.estimate.optimizer_s, to_gib(r.estimate.peak_bytes), r.verdict,
                       r.origin == "grid" ? "" : " (" + r.origin + ")");
  };
  for (size_t i = 0; i < shown; ++i) out += row(ranked[i]);
  if (ranked.size() > shown) {
    size_t unfit = std::count_if(ranked.begin(), ranked.end(), [](const Ranked& r) { return !r.estimate.fits; });
    out += fmt::format("  ... {} more plans ({} of all {} do not fit)\n", ranked.size() - shown, unfit, ranked.size());
  }
  for (auto& r : unrestricted) out += row(r);
  if (unpinned) {
    out += fmt::format("  pinned: {}; the planner's choice without them:\n", pins);
    out += row(*unpinned);
  }
  if (!layer_layout_note.empty()) out += fmt::format("  each layer: {}\n", layer_layout_note);
  if (experts)
    out += fmt::format("  experts: {} a layer, {} a token; ep: each layer's experts over ep replicas, tokens to them and "
                       "back by all-to-all (routing assumed balanced)\n", model.experts, model.experts_per_token);
  if (!model.one_stage_reason.empty()) out += fmt::format("  one stage: {}\n", model.one_stage_reason);
  if (search_s > 0)
    out += fmt::format("  searched in {:.2f} s{}\n", search_s,
                       trace_s > 0 ? fmt::format(", after tracing one layer in {:.2f} s", trace_s) : "");
  return out;
}

Plan make_plan(const PlanRequest& request) {
  namespace fs = std::filesystem;
  const bool directory = !request.config && fs::is_directory(request.model);
  ModelConfig config = request.config ? *request.config
                       : directory    ? ModelConfig(read_json_file((fs::path(request.model) / "config.json").string(), "plan"))
                                      : ModelConfig::preset(request.model);
  auto shape = ModelShape::from_config(config, request.model);
  auto cluster = Cluster::parse(request.cluster, devices_dir());
  auto pricing = price_layers(request.layer_costs, config, shape, cluster, request.work);
  shape.layouts = pricing.layouts;
  Plan plan = plan_parallel(shape, cluster, request.work, request.search);
  if (request.pins.any()) keep_pins(plan, request.pins);
  if (request.config) plan.model_source = config.json();
  // the script runs from anywhere (a tuner's trials, another directory): the absolute path
  else if (directory) plan.model_source = fs::absolute(request.model).lexically_normal().string();
  if (!request.pick.empty()) plan.pick(request.pick);
  lay_out_layers(plan, pricing);
  return plan;
}

}  // namespace slapo::plan
