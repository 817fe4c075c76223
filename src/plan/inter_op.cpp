// Alpa's stage-construction dynamic program (ALPA.md section 3), on the cost model's stages.
//
// f[s][i][j]: the least sum of stage costs placing layers i..L-1 on s stages over the last j
// devices, every stage no slower than a bound t_max; the step is then f + (B - 1) t_max. Each
// bound is one program; bounds run from the smallest feasible one upwards until B x t_max alone
// exceeds the best step found (Alpa's pruning). The sum counts each stage's gradient sync and
// update, which run once a step on all stages at once: a bias against many stages that the exact
// estimate of each program's plan then removes. A stage's cost depends on its layer count, whether
// it holds the embedding or the head, its submesh, how many micro-batches it keeps and whether the
// next stage shares its node, so the choices are tabulated once per micro-batch count.
#include "plan/inter_op.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <thread>

#include "core/error.h"

namespace slapo::plan {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Config {
  int tp, dp;
  bool checkpoint, zero;
  bool sequence = false;
  int ep = 1;  // a mixture of experts' experts over groups of ep replicas (one rank layout only)
};

// Sequence parallelism off, and on where the model offers it on tp ranks.
std::vector<bool> sequence_choices(const ModelShape& m, const Workload& w, int tp) {
  if (m.sequence_parallel_on(tp, w.seq)) return {false, true};
  return {false};
}

// One stage choice that fits in memory: its micro-batch time (bounded by t_max) and its cost in
// the program's sum (the time plus its once-a-step gradient sync and update).
struct Option {
  double time, cost;
  int config;
};

struct Mesh {
  int size;
  std::vector<Config> configs;
  std::vector<LayerCosts> costs;  // per config
};

// TP divides the heads, and a mixture of experts' expert width (the reference schedule keeps the
// experts whole otherwise, which the cost model does not price)
bool divides_heads(const ModelShape& m, int tp) {
  return m.heads % tp == 0 && m.kv_heads % tp == 0 && (m.experts == 0 || m.inner % tp == 0);
}

// A TP group's ranks are consecutive: on one node any tp up to its devices; over several, tp dividing
// a node's devices, so none spans two nodes (the cost model prices TP on the node's links).
bool tp_fits_nodes(const Cluster& c, int tp) { return tp <= c.per_node && (c.nodes == 1 || c.per_node % tp == 0); }

// Alpa's submeshes sit aligned (one within a node, or whole nodes from a node's start: the program's
// `aligned`), so a submesh inside one node keeps any tp of its devices there; one of whole nodes
// needs tp dividing a node's devices.
bool tp_fits_submesh(const Cluster& c, int size, int tp) {
  return size <= c.per_node ? tp <= size : tp_fits_nodes(c, tp);
}

// Expert parallelism's choices on dp replicas: 1, and each ep dividing both dp and the experts.
std::vector<int> expert_choices(const ModelShape& m, int dp) {
  std::vector<int> choices = {1};
  for (int ep = 2; ep <= dp && m.experts > 0; ++ep)
    if (dp % ep == 0 && m.experts % ep == 0) choices.push_back(ep);
  return choices;
}

// Whether ZeRO and fully_shard go with ep on pp stages: one stage, or experts not spread (a
// pipeline's stages with spread experts run plain replicas: ZeRO and fully_shard beside them are
// untested)
bool zero_with_experts(int ep, int pp) { return ep == 1 || pp == 1; }

// Context parallelism in pipeline stages runs beside plain replicas only: the pipeline's dp_group
// averages each cp rank's part of the gradients (ZeRO-1 has none; fully_shard and sequence
// parallelism beside it in stages are untested). One stage takes all of them.
bool cp_in_stages_with(int cp, int pp, bool sharded, bool sequence) {
  return cp == 1 || pp == 1 || (!sharded && !sequence);
}

// Context parallelism's choices on dp replicas, with whether attention is
// Ulysses' all-to-all: 1, and for long sequences of a model context_parallel splits, each cp
// dividing dp whose 2 x cp chunks divide the sequence (the load-balanced split), by the ring and,
// where each rank's heads (over tp) divide over cp, by all-to-all. Below kLongSequence the grid keeps to its other axes: there the model's
// attention without the ring (scores kept whole, 5as/h of Megatron's activations) is what eager
// attention holds, but fused attention kernels, which it does not price, hold far less.
constexpr int64_t kLongSequence = 16384;
std::vector<std::pair<int, bool>> context_choices(const ModelShape& m, const Workload& w, int tp, int dp) {
  std::vector<std::pair<int, bool>> choices = {{1, false}};
  if (!m.context_parallel || w.seq < kLongSequence || m.experts > 0) return choices;
  for (int cp = 2; cp <= dp; ++cp)
    if (dp % cp == 0 && w.seq % (2 * cp) == 0) {
      choices.push_back({cp, false});
      if ((m.heads / tp) % cp == 0) choices.push_back({cp, true});
    }
  return choices;
}

// Alpa's submesh shapes: 1, 2, 4 .. devices of one node (and the whole node), then 2, 4 .. whole nodes.
std::vector<int> submesh_sizes(const Cluster& c) {
  std::vector<int> sizes;
  for (int n = 1; n < c.per_node; n *= 2) sizes.push_back(n);
  sizes.push_back(c.per_node);
  for (int k = 2; k <= c.nodes; k *= 2) sizes.push_back(k * c.per_node);
  return sizes;
}

class Program {
 public:
  Program(const ModelShape& m, const Cluster& c, const Workload& w, int micro, std::vector<Mesh> meshes,
          int max_stages)
      : model_(m), cluster_(c), work_(w), micro_(micro), meshes_(std::move(meshes)) {
    layers_ = static_cast<int>(m.layers);
    devices_ = c.devices();
    stages_ = std::min({layers_, devices_, max_stages > 0 ? max_stages : devices_});
    in_flight_ = std::min(micro_, stages_);
    tabulate();
    find_reachable();
    weigh(1.0);
  }

  // How much of each stage's once-a-step cost (gradient sync, update) the program's sum counts:
  // the fronts of the choices no other beats in both time and that cost.
  void weigh(double once_weight) {
    once_weight_ = once_weight;
    fronts_.assign(fitting_.size(), {});
    for (size_t f = 0; f < fitting_.size(); ++f) {
      std::vector<Option> options;
      for (auto& e : fitting_[f]) options.push_back({e.time, e.time + once_weight * e.once, e.config});
      // ascending time; of equal times the cheapest (configs come simplest first)
      std::stable_sort(options.begin(), options.end(), [](const Option& a, const Option& b) {
        return a.time < b.time || (a.time == b.time && a.cost < b.cost);
      });
      for (auto& o : options)
        if (fronts_[f].empty() || o.cost < fronts_[f].back().cost) fronts_[f].push_back(o);
    }
  }

  // Gives this thread's tables back (the planning thread keeps them otherwise).
  static void release_tables() { tables() = Tables(); }

  // The best candidate over every bound; `programs` counts the programs solved. `cutoff()` is a
  // step the other searches have already beaten twice: bounds whose plans take longer are skipped.
  bool solve(Candidate& best, Estimate& best_estimate, int& programs,
             const std::function<double()>& cutoff = [] { return kInf; },
             const std::function<void(double)>& publish = [](double) {}) {
    std::vector<double> bounds;
    for (auto& front : fronts_)
      for (auto& o : front) bounds.push_back(o.time);
    std::sort(bounds.begin(), bounds.end());
    bounds.erase(std::unique(bounds.begin(), bounds.end(),
                             [](double a, double b) { return b <= a * (1 + 1e-9); }),
                 bounds.end());
    if (bounds.empty()) return false;
    // One micro-batch: the bound does not enter the step.
    if (micro_ == 1) {
      ++programs;
      return run(kInf) && take(best, best_estimate);
    }
    // the least sum of stage times any plan has (the program with no once-a-step costs and no
    // bound); none: nothing fits
    const double weight = once_weight_;
    weigh(0.0);
    ++programs;
    const bool feasible = run(kInf);
    const double least_time = best_sum_;
    weigh(weight);
    if (!feasible) return false;
    // a plan whose slowest stage takes a bound takes at least the stages' times and micro-batches
    // - 1 times the bound (1F1B): bounds where that is no better than a plan already found (this
    // search's, or two other searches') need no program
    const double once = least_once();
    auto beaten = [&](double bound) {
      const double least_step = std::max(micro_ * bound, (micro_ - 1) * bound + least_time) + once;
      return (best_estimate.fits && least_step >= best_estimate.step_s) || least_step > cutoff();
    };
    size_t hi = bounds.size();
    while (hi > 0 && beaten(bounds[hi - 1])) --hi;  // bounds[0, hi) may still win
    if (hi == 0) return false;
    // the smallest feasible bound, by bisection (feasibility only grows with the bound)
    ++programs;
    if (!run(bounds[hi - 1])) return false;
    size_t lo = 0;
    for (size_t top = hi - 1; lo < top;) {
      size_t mid = (lo + top) / 2;
      ++programs;
      if (run(bounds[mid])) top = mid;
      else lo = mid + 1;
    }
    bool found = false;
    for (size_t b = lo; b < bounds.size() && !beaten(bounds[b]); ++b) {
      ++programs;
      if (run(bounds[b]) && take(best, best_estimate)) found = true, publish(best_estimate.step_s);
    }
    return found;
  }

 private:
  // The least once-a-step cost (gradient sync and update) a plan's step pays: the step pays its
  // slowest stage's, so at least what the cheapest fitting first stage and the cheapest fitting last
  // stage pay (every plan has both; they hold the embedding and the head).
  double least_once() const {
    double first = kInf, last = kInf;
    for (int length = 1; length <= layers_; ++length)
      for (int flags = 1; flags < 4; ++flags)
        for (size_t mi = 0; mi < meshes_.size(); ++mi)
          for (int in_flight = 1; in_flight <= in_flight_; ++in_flight)
            for (bool next_in_node : {false, true})
              for (auto& e : fitting_[front_index(length, flags & 2, flags & 1, mi, in_flight, next_in_node)]) {
                if (flags & 2) first = std::min(first, e.once);
                if (flags & 1) last = std::min(last, e.once);
              }
    return std::max(first == kInf ? 0.0 : first, last == kInf ? 0.0 : last);
  }

  // Stage shapes with the layer count innermost: run() reads a shape's lengths side by side.
  size_t shape_index(bool first, bool last, size_t mesh, int in_flight, bool next_in_node) const {
    return (((static_cast<size_t>(first) * 2 + last) * meshes_.size() + mesh) * in_flight_ + (in_flight - 1)) * 2 +
           next_in_node;
  }
  size_t front_index(int length, bool first, bool last, size_t mesh, int in_flight, bool next_in_node) const {
    return shape_index(first, last, mesh, in_flight, next_in_node) * layers_ + (length - 1);
  }

  // Every fitting choice for every stage shape, estimated once.
  void tabulate() {
    fitting_.assign(static_cast<size_t>(layers_) * 4 * meshes_.size() * in_flight_ * 2, {});
    const double usable = kUsableMemory * cluster_.device.memory_bytes;
    for (int length = 1; length <= layers_; ++length)
      for (int flags = 0; flags < 4; ++flags) {
        bool first = flags & 2, last = flags & 1;
        if (first && last && length != layers_) continue;
        for (size_t mi = 0; mi < meshes_.size(); ++mi) {
          const Mesh& mesh = meshes_[mi];
          bool dp_in_node = mesh.size <= cluster_.per_node;
          for (int in_flight = 1; in_flight <= in_flight_; ++in_flight)
            for (bool next_in_node : {false, true}) {
              auto& fitting = fitting_[front_index(length, first, last, mi, in_flight, next_in_node)];
              for (size_t ci = 0; ci < mesh.configs.size(); ++ci) {
                const Config& cfg = mesh.configs[ci];
                Stage stage{length, cfg.tp, cfg.dp, cfg.checkpoint, cfg.zero, cfg.sequence};
                stage.ep = cfg.ep;
                auto e = stage_estimate(model_, cluster_, work_, mesh.costs[ci], stage,
                                        {first, last, dp_in_node, next_in_node, in_flight});
                if (e.peak_bytes <= usable) fitting.push_back({e.time_s(), e.once_s(), static_cast<int>(ci)});
              }
            }
        }
      }
  }

  int node(int device) const { return device / cluster_.per_node; }

  // f[s][i][j] in the flat tables, layers innermost: the choice of a stage's last layer reads a row
  size_t at(int s, int i, int j) const {
    return (static_cast<size_t>(s) * (devices_ + 1) + j) * (layers_ + 1) + i;
  }

  // Which device counts s stages can hold, as sums of s mesh sizes (alignment aside): the program
  // visits only those. One layout's program holds s x its mesh size alone.
  void find_reachable() {
    const int S = stages_, N = devices_;
    reachable_.assign(static_cast<size_t>(S + 1) * (N + 1), 0);
    reachable_[0] = 1;
    for (int s = 1; s <= S; ++s)
      for (int j = 0; j <= N; ++j)
        if (reachable_[static_cast<size_t>(s - 1) * (N + 1) + j])
          for (auto& mesh : meshes_)
            if (j + mesh.size <= N) reachable_[static_cast<size_t>(s) * (N + 1) + j + mesh.size] = 1;
  }
  bool reachable(int s, int j) const { return reachable_[static_cast<size_t>(s) * (devices_ + 1) + j]; }

  // A submesh of `size` at device `offset` must lie within one node, or start a node and take whole ones.
  bool aligned(int offset, int size) const {
    if (size <= cluster_.per_node) return node(offset) == node(offset + size - 1);
    return offset % cluster_.per_node == 0;
  }

  // Solves f for the bound; remembers the best final state. False when nothing fits.
  bool run(double bound) {
    // the cheapest option within the bound, per front: its cost (infinite: none) and config
    picked_cost_.assign(fronts_.size(), kInf);
    picked_config_.assign(fronts_.size(), 0);
    for (size_t f = 0; f < fronts_.size(); ++f) {
      auto& front = fronts_[f];
      for (int o = static_cast<int>(front.size()) - 1; o >= 0; --o)
        if (front[o].time <= bound) {
          picked_cost_[f] = front[o].cost, picked_config_[f] = front[o].config;
          break;
        }
    }
    const int S = stages_, L = layers_, N = devices_;
    // per stage shape, the layer counts with an option within the bound (a small mesh holds few layers)
    shortest_.assign(fronts_.size() / L, L);
    longest_.assign(shortest_.size(), -1);
    for (size_t shape = 0; shape < shortest_.size(); ++shape)
      for (int t = 0; t < L; ++t)
        if (picked_cost_[shape * L + t] < kInf) shortest_[shape] = std::min(shortest_[shape], t), longest_[shape] = t;
    // rows are cleared as they are visited: the unreachable ones are never read
    cost_.resize(static_cast<size_t>(S + 1) * (L + 1) * (N + 1));
    choice_.resize(cost_.size());
    std::fill_n(&cost_[at(0, 0, 0)], L + 1, kInf);
    cost_[at(0, L, 0)] = 0;
    first_finite_.assign(static_cast<size_t>(S + 1) * (N + 1), L + 1);
    last_finite_.assign(first_finite_.size(), -1);
    first_finite_[0] = last_finite_[0] = L;
    for (int s = 1; s <= S; ++s) {
      const int in_flight = std::min(micro_, s);
      for (int j = s; j <= N; ++j) {
        if (!reachable(s, j)) continue;
        std::fill_n(&cost_[at(s, 0, j)], L + 1, kInf);
        std::fill_n(&choice_[at(s, 0, j)], L + 1, Choice{});
        const int offset = N - j;
        for (size_t mi = 0; mi < meshes_.size(); ++mi) {
          const int n = meshes_[mi].size;
          const int rest = j - n;
          if (rest < s - 1 || !reachable(s - 1, rest) || !aligned(offset, n)) continue;
          const bool next_in_node = rest == 0 || node(offset + n - 1) == node(offset + n);
          // the next stages' least sums by their first layer k, finite for k in first_k..last_k
          const double* before = &cost_[at(s - 1, 0, rest)];
          const int first_k = first_finite_[static_cast<size_t>(s - 1) * (N + 1) + rest];
          const int last_k = last_finite_[static_cast<size_t>(s - 1) * (N + 1) + rest];
          if (first_k > last_k) continue;
          for (int i = std::min(L - s, last_k - 1); i >= 0; --i) {
            double& best = cost_[at(s, i, j)];
            Choice& choice = choice_[at(s, i, j)];
            // the stage takes layers i..k-1: the last stage (nothing after it) ends at L, the others before
            if (rest == 0) {
              const size_t f = shape_index(i == 0, true, mi, in_flight, next_in_node) * L + (L - i - 1);
              const double value = before[L] + picked_cost_[f];
              if (value < best)
                best = value, choice = {static_cast<int16_t>(L), static_cast<int16_t>(mi),
                                        static_cast<int16_t>(picked_config_[f])};
              continue;
            }
            // by the stage's length t = k - i - 1: the next stages' sums and this stage's cost
            const size_t shape_id = shape_index(i == 0, false, mi, in_flight, next_in_node);
            const size_t shape = shape_id * L;
            const double* next = before + i + 1;
            const double* stage = picked_cost_.data() + shape;
            const int first_t = std::max(std::max(i + 1, first_k) - i - 1, shortest_[shape_id]);
            const int last_t = std::min(last_k - i - 1, longest_[shape_id]);
            if (first_t > last_t) continue;
            const double least = least_sum(next, stage, first_t, last_t);
            if (least < best) {
              int t = first_t;
              while (next[t] + stage[t] != least) ++t;  // the first length that gives it, as a scan would
              best = least, choice = {static_cast<int16_t>(i + 1 + t), static_cast<int16_t>(mi),
                                      static_cast<int16_t>(picked_config_[shape + t])};
            }
          }
        }
        for (int i = 0; i <= L; ++i)  // the layers this level's sums can start at, for the level above
          if (cost_[at(s, i, j)] < kInf) {
            size_t r = static_cast<size_t>(s) * (N + 1) + j;
            first_finite_[r] = std::min(first_finite_[r], i), last_finite_[r] = i;
          }
      }
    }
    best_sum_ = kInf;
    for (int s = 1; s <= S; ++s)
      if (reachable(s, N) && cost_[at(s, 0, N)] < best_sum_) best_sum_ = cost_[at(s, 0, N)], best_stages_ = s;
    return best_sum_ < kInf;
  }

  // The last program's plan, estimated exactly; kept when it beats `best`.
  bool take(Candidate& best, Estimate& best_estimate) {
    const int N = devices_;
    Candidate c;
    c.micro_batches = micro_;
    for (int s = best_stages_, i = 0, j = N; s > 0; --s) {
      const Choice& ch = choice_[at(s, i, j)];
      const Config& cfg = meshes_[ch.mesh].configs[ch.config];
      c.stages.push_back({ch.next_layer - i, cfg.tp, cfg.dp, cfg.checkpoint, cfg.zero, cfg.sequence});
      c.stages.back().ep = cfg.ep;
      j -= meshes_[ch.mesh].size;
      i = ch.next_layer;
    }
    c.tp = c.stages[0].tp, c.dp = c.stages[0].dp, c.zero = c.stages[0].zero, c.ep = c.stages[0].ep;
    c.sequence = std::all_of(c.stages.begin(), c.stages.end(), [](const Stage& s) { return s.sequence; });
    c.checkpoint = std::all_of(c.stages.begin(), c.stages.end(), [](const Stage& s) { return s.checkpoint; });
    if (c.stages.size() == 1) c.stages.clear();  // one stage: tp x dp with gradient accumulation
    Estimate e = estimate(model_, cluster_, work_, c);
    if (!e.fits || (best_estimate.fits && e.step_s >= best_estimate.step_s)) return false;
    best = std::move(c), best_estimate = std::move(e);
    return true;
  }

  // 16 bits each: the tables hold one per state, and a 1,024-device program has millions of states
  struct Choice {
    int16_t next_layer = 0, mesh = 0, config = 0;
  };

  // min over t in first..last of next[t] + stage[t], in four independent lanes so the compiler
  // keeps them in registers (the program's innermost loop)
  static double least_sum(const double* next, const double* stage, int first, int last) {
    double a = kInf, b = kInf, c = kInf, d = kInf;
    int t = first;
    for (; t + 3 <= last; t += 4) {
      double va = next[t] + stage[t], vb = next[t + 1] + stage[t + 1];
      double vc = next[t + 2] + stage[t + 2], vd = next[t + 3] + stage[t + 3];
      a = va < a ? va : a, b = vb < b ? vb : b, c = vc < c ? vc : c, d = vd < d ? vd : d;
    }
    for (; t <= last; ++t) {
      double v = next[t] + stage[t];
      a = v < a ? v : a;
    }
    a = b < a ? b : a, c = d < c ? d : c;
    return c < a ? c : a;
  }

  const ModelShape& model_;
  const Cluster& cluster_;
  const Workload& work_;
  int micro_, layers_ = 0, devices_ = 0, stages_ = 0, in_flight_ = 1;
  std::vector<Mesh> meshes_;
  struct Estimated {
    double time, once;  // per micro-batch; once a step
    int config;
  };
  std::vector<std::vector<Estimated>> fitting_;  // per stage shape (front_index)
  std::vector<std::vector<Option>> fronts_;
  double once_weight_ = 1.0;         // the fronts' weight of the once-a-step costs
  std::vector<double> picked_cost_;  // per front, within run()'s bound
  std::vector<int> picked_config_;
  std::vector<int> shortest_, longest_;  // per stage shape: the layer counts (less one) with an option
  std::vector<char> reachable_;      // [s][j]: s stages can hold j devices
  std::vector<int> first_finite_, last_finite_;  // [s][j]: the first layers i whose f[s][i][j] is finite
  // f and its choices: one set of tables per thread, reused by each program it solves (touching a
  // fresh million-state table's pages costs more than solving on it)
  struct Tables {
    std::vector<double> cost;
    std::vector<Choice> choice;
  };
  static Tables& tables() {
    thread_local Tables t;
    return t;
  }
  std::vector<double>& cost_ = tables().cost;
  std::vector<Choice>& choice_ = tables().choice;
  double best_sum_ = kInf;
  int best_stages_ = 0;
};

// Alpa's submeshes and their intra-op choices for one micro-batch size.
std::vector<Mesh> meshes_for(const ModelShape& m, const Cluster& c, const Workload& w, int64_t micro_batch) {
  std::vector<Mesh> meshes;
  for (int size : submesh_sizes(c)) {
    if (size > c.devices()) continue;
    Mesh mesh{size, {}, {}};
    for (int tp = 1; tp <= std::min(size, c.per_node); ++tp) {
      if (size % tp != 0 || !tp_fits_submesh(c, size, tp) || !divides_heads(m, tp)) continue;
      int dp = size / tp;
      if (micro_batch % dp != 0) continue;
      for (bool sequence : sequence_choices(m, w, tp)) {
        LayerCosts costs = layer_costs(m, c, w, micro_batch, tp, dp, sequence);
        for (bool zero : {false, true}) {
          if (zero && dp == 1) continue;
          for (bool checkpoint : {false, true}) {
            mesh.configs.push_back({tp, dp, checkpoint, zero, sequence});
            mesh.costs.push_back(costs);
          }
        }
      }
    }
    if (!mesh.configs.empty()) meshes.push_back(std::move(mesh));
  }
  return meshes;
}

}  // namespace

std::vector<int> micro_batch_choices(int64_t batch) {
  std::vector<int> out;
  for (int64_t b = 1; b <= batch && b <= (1 << 20); ++b)
    if (batch % b == 0) out.push_back(static_cast<int>(b));
  return out;
}

InterOpResult plan_inter_op(const ModelShape& model, const Cluster& cluster, const Workload& work,
                            const InterOpOptions& options) {
  auto start = std::chrono::steady_clock::now();
  if (work.batch < 1 || work.seq < 1)
    throw Error(fmt::format("plan: --batch and --seq must be >= 1, got {} and {}", work.batch, work.seq));
  if (model.layers < 1) throw Error(fmt::format("plan: {} has no layers to place", model.name));
  // One search per micro-batch count, each with its own best (so the result does not depend on
  // which finishes first), spread over the cores; the best of them wins, ties to fewer micro-batches.
  struct Search {
    int micro;
    Candidate candidate;
    Estimate estimate;
    int programs = 0;
    bool found = false;
  };
  std::vector<Search> searches;
  for (int micro : micro_batch_choices(work.batch)) searches.push_back({micro, {}, {}, 0, false});
  // Each search's best step so far. A search stops where its plans would be slower than two other
  // searches' bests: it can then be neither the best nor the second best, which the submesh
  // program solves once more below, so the result is the same as without the cutoff.
  std::vector<std::atomic<double>> bests(searches.size());
  for (auto& b : bests) b = kInf;
  auto run_search = [&](Search& search) {
    const int micro = search.micro;
    const int64_t micro_batch = work.batch / micro;
    const size_t self = &search - searches.data();
    auto second_best_of_others = [&bests, self] {
      double first = kInf, second = kInf;
      for (size_t i = 0; i < bests.size(); ++i) {
        if (i == self) continue;
        double v = bests[i].load(std::memory_order_relaxed);
        if (v < first) second = first, first = v;
        else if (v < second) second = v;
      }
      return second;
    };
    auto solve = [&](std::vector<Mesh> meshes, int max_stages) {
      Program program(model, cluster, work, micro, std::move(meshes), max_stages);
      search.found |= program.solve(search.candidate, search.estimate, search.programs, second_best_of_others,
                                    [&bests, self](double step) { bests[self].store(step, std::memory_order_relaxed); });
    };
    if (!options.uniform_mesh) {
      auto meshes = meshes_for(model, cluster, work, micro_batch);
      if (!meshes.empty()) solve(std::move(meshes), options.max_stages);
      return;
    }
    // one rank layout: every tp x dp dividing the devices, pp = devices / (tp x dp)
    for (int tp = 1; tp <= cluster.per_node; ++tp)
      for (int dp = 1; tp * dp <= cluster.devices(); ++dp) {
        int n = tp * dp;
        if (cluster.devices() % n != 0 || cluster.devices() / n > model.layers) continue;
        if (options.max_stages > 0 && cluster.devices() / n > options.max_stages) continue;
        if (!tp_fits_nodes(cluster, tp) || !divides_heads(model, tp) || micro_batch % dp != 0) continue;
        const int pp = cluster.devices() / n;
        for (bool sequence : sequence_choices(model, work, tp))
          for (bool zero : {false, true})
            for (int ep : expert_choices(model, dp)) {
              if (zero && (dp == 1 || !zero_with_experts(ep, pp))) continue;
              // the layout's submesh is n devices, whatever Alpa's shapes are
              LayerCosts costs = layer_costs(model, cluster, work, micro_batch, tp, dp, sequence, ep);
              solve({{n, {{tp, dp, false, zero, sequence, ep}, {tp, dp, true, zero, sequence, ep}}, {costs, costs}}},
                    pp);
            }
      }
  };
  std::atomic<size_t> next{0};
  auto worker = [&] {
    // the most micro-batches first: their bests come early and cut the few-micro-batch searches short
    for (size_t i = next++; i < searches.size(); i = next++) run_search(searches[searches.size() - 1 - i]);
  };
  unsigned threads = std::max(1u, std::min<unsigned>(std::thread::hardware_concurrency(), 8));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();

  // The step pays the slowest stage's once-a-step cost (gradient sync, update), the program's sum
  // every stage's. With a submesh per stage, the two best micro-batch counts' programs are solved
  // once more counting a quarter of that cost; the exact estimates keep the better plans.
  if (!options.uniform_mesh) {
    std::vector<Search*> found;
    for (auto& search : searches)
      if (search.found) found.push_back(&search);
    std::stable_sort(found.begin(), found.end(),
                     [](const Search* a, const Search* b) { return a->estimate.step_s < b->estimate.step_s; });
    for (size_t i = 0; i < std::min<size_t>(found.size(), 2); ++i) {
      Search& search = *found[i];
      Program program(model, cluster, work, search.micro,
                      meshes_for(model, cluster, work, work.batch / search.micro), options.max_stages);
      program.weigh(0.25);
      // a plan slower than another search's best cannot be the result
      auto others_best = [&] {
        double best = kInf;
        for (auto* other : found)
          if (other != &search) best = std::min(best, other->estimate.step_s);
        return best;
      };
      program.solve(search.candidate, search.estimate, search.programs, others_best);
    }
  }
  Program::release_tables();
  InterOpResult result;
  bool found = false;
  for (auto& search : searches) {
    result.programs += search.programs;
    if (search.found && (!found || search.estimate.step_s < result.estimate.step_s)) {
      result.candidate = std::move(search.candidate), result.estimate = std::move(search.estimate);
      found = true;
    }
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (!found)
    throw Error(fmt::format("plan: no pipeline of {} over {} x {} {} fits in {:.1f} GiB per device with batch {} x "
                            "seq {} (fewer sequences per step, or more devices)",
                            model.name, cluster.nodes, cluster.per_node, cluster.device.name,
                            to_gib(kUsableMemory * cluster.device.memory_bytes), work.batch, work.seq));
  return result;
}

std::vector<Candidate> megatron_grid(const ModelShape& model, const Cluster& cluster, const Workload& work) {
  std::vector<Candidate> grid;
  const int n = cluster.devices();
  for (int tp = 1; tp <= std::min(n, cluster.per_node); ++tp) {
    if (n % tp != 0 || !tp_fits_nodes(cluster, tp) || !divides_heads(model, tp)) continue;
    for (int pp = 1; pp <= n / tp && pp <= model.layers; ++pp) {
      if ((n / tp) % pp != 0 || (pp > 1 && !model.one_stage_reason.empty())) continue;
      int dp = n / tp / pp;
      for (int micro : micro_batch_choices(work.batch))
        for (auto [cp, cp_all_to_all] : context_choices(model, work, tp, dp)) {
          // one stage: micro-batches accumulate gradients; the rows split over dp / cp data
          // replicas (a cp group's ranks take the same rows)
          if ((work.batch / micro) % (dp / cp) != 0) continue;
          for (bool sequence : sequence_choices(model, work, tp))
            for (bool checkpoint : {false, true})
              // the optimizer state over several replicas: whole, ZeRO-1, or fully sharded with the
              // gradients (the weights kept whole from forward to backward: ZeRO-2) or with the
              // weights too (ZeRO-3), each stage's blocks over its replicas; simplest first, so ties
              // keep it
              for (int sharding : {0, 1, 2, 3}) {
                const bool zero = sharding == 1, fully_sharded = sharding >= 2, kept = sharding == 2;
                if ((zero || fully_sharded) && dp == 1) continue;
                // context parallelism runs with TP (Megatron's sequence parallelism inside it
                // included, where a cp rank's tokens divide over tp), and ZeRO or fully_shard over all
                // dp replicas (cp groups included, as torchtitan)
                if (cp > 1 && sequence && (work.seq / cp) % tp != 0) continue;
                if (!cp_in_stages_with(cp, pp, zero || fully_sharded, sequence)) continue;
                // a mixture of experts' experts over groups of ep replicas (ZeRO-1 slices their
                // moments over the replicas holding the same experts)
                for (int ep : expert_choices(model, dp)) {
                  if (sharding != 0 && !zero_with_experts(ep, pp)) continue;
                  Candidate c{tp, dp, checkpoint, zero, micro, {}, sequence, fully_sharded, kept, ep, cp, cp_all_to_all};
                  if (pp > 1)
                    for (int s = 0; s < pp; ++s) {
                      int layers = static_cast<int>((s + 1) * model.layers / pp - s * model.layers / pp);
                      c.stages.push_back(
                          {layers, tp, dp, checkpoint, zero, sequence, fully_sharded, kept, ep, cp, cp_all_to_all});
                    }
                  grid.push_back(std::move(c));
                }
              }
        }
    }
  }
  return grid;
}

void check_named_plan(const ModelShape& model, const Cluster& cluster, const Workload& work, const Candidate& c) {
  const std::string name = c.describe();
  auto refuse = [&](const std::string& why) { throw Error(fmt::format("plan: --pick '{}': {}", name, why)); };
  for (auto& s : c.resolved(static_cast<int>(model.layers)))
    if (s.tp > cluster.devices() || s.dp > cluster.devices())
      refuse(fmt::format("tp {} x dp {} is more than the cluster's {} devices", s.tp, s.dp, cluster.devices()));
  if (c.devices() != cluster.devices())
    refuse(fmt::format("it runs on {} devices; the cluster has {} ({} x {})", c.devices(), cluster.devices(),
                       cluster.nodes, cluster.per_node));
  if (work.batch % c.micro_batches != 0)
    refuse(fmt::format("{} micro-batches do not divide --batch {} (choices: {})", c.micro_batches, work.batch,
                       fmt::join(micro_batch_choices(work.batch), ", ")));
  const auto stages = c.resolved(static_cast<int>(model.layers));
  if (stages.size() > 1 && !model.one_stage_reason.empty()) refuse(fmt::format("one stage only: {}", model.one_stage_reason));
  int layers = 0;
  for (auto& s : stages) layers += s.layers;
  if (layers != model.layers) refuse(fmt::format("its stages hold {} layers; {} has {}", layers, model.name, model.layers));
  if (!c.uniform_mesh() && model.experts > 0)
    refuse("a mixture of experts runs its stages on one rank layout (tp x dp x pp), not a mesh per stage");
  const int64_t micro_batch = work.batch / c.micro_batches;
  int offset = 0;
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage& s = stages[i];
    const std::string where = stages.size() > 1 ? fmt::format("stage {}: ", i) : "";
    auto stage_refuse = [&](const std::string& why) { refuse(where + why); };
    if (s.tp > cluster.per_node) stage_refuse(fmt::format("tp {} spans nodes of {} devices", s.tp, cluster.per_node));
    // a TP group's ranks are consecutive (stage_layout, layout): each must lie in one node
    for (int group = offset; group < offset + s.tp * s.dp; group += s.tp)
      if (group / cluster.per_node != (group + s.tp - 1) / cluster.per_node)
        stage_refuse(fmt::format("the tp group of ranks {}-{} spans two nodes of {} devices", group, group + s.tp - 1,
                                 cluster.per_node));
    offset += s.tp * s.dp;
    if (!divides_heads(model, s.tp))
      stage_refuse(fmt::format("tp {} does not divide {}'s {} heads ({} key/value heads{})", s.tp, model.name,
                               model.heads, model.kv_heads,
                               model.experts > 0 ? fmt::format(", experts {} wide", model.inner) : ""));
    if (s.cp > 1) {
      if (!model.context_parallel || model.experts > 0)
        stage_refuse(fmt::format("cp: {} does not split its sequences (context_parallel takes LLaMA, Qwen2 and "
                                 "Mistral without attention dropout or dynamic rotary scaling, GPT-2 with attn_pdrop 0)", model.name));
      if (s.dp % s.cp != 0) stage_refuse(fmt::format("cp {} does not divide dp {}", s.cp, s.dp));
      if (work.seq % (2 * s.cp) != 0)
        stage_refuse(fmt::format("--seq {} is not divisible by 2 x cp ({} chunks, load-balanced)", work.seq, 2 * s.cp));
      if (s.cp_all_to_all && (model.heads / s.tp) % s.cp != 0)
        stage_refuse(fmt::format("cp {} all-to-all: each tp rank's {} heads do not divide over cp", s.cp,
                                 model.heads / s.tp));
      if (s.sequence && (work.seq / s.cp) % s.tp != 0)
        stage_refuse(fmt::format("sequence: a cp rank's {} tokens do not divide over tp {}", work.seq / s.cp, s.tp));
      if (!cp_in_stages_with(s.cp, static_cast<int>(stages.size()), s.zero || s.fully_sharded, s.sequence))
        stage_refuse("cp in pipeline stages runs beside plain replicas: the pipeline's dp_group averages the cp "
                     "ranks' parts of the gradients (no zero-1, fully sharded or sequence beside it yet)");
    }
    const int replicas = s.dp / s.cp;  // a cp group's ranks take the same rows
    if (micro_batch % replicas != 0)
      stage_refuse(fmt::format("{} data-parallel replicas do not divide a micro-batch of {} rows (--batch {} / {} "
                               "micro)", replicas, micro_batch, work.batch, c.micro_batches));
    if (s.sequence && !model.sequence_parallel_on(s.tp, work.seq))
      stage_refuse(fmt::format("sequence parallelism needs tp >= 2 dividing --seq {} and the layers priced by the "
                               "intra-op pass (--layer-costs ilp)", work.seq));
    if ((s.zero || s.fully_sharded) && s.dp == 1)
      stage_refuse(fmt::format("{} shards over data-parallel replicas; dp is 1", s.zero ? "zero-1" : "fully sharded"));
    if (s.ep > 1) {
      if (model.experts == 0) stage_refuse(fmt::format("ep {}: {} has no experts", s.ep, model.name));
      if (s.dp % s.ep != 0 || model.experts % s.ep != 0)
        stage_refuse(fmt::format("ep {} must divide dp {} and the {} experts", s.ep, s.dp, model.experts));
      if ((s.zero || s.fully_sharded) && !zero_with_experts(s.ep, static_cast<int>(stages.size())))
        stage_refuse("experts spread over pipeline stages run plain replicas (no zero-1 or fully sharded)");
    }
  }
}

}  // namespace slapo::plan
