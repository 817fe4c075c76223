// The intra-op pass: layouts propagated through a traced layer for each assignment of parallel
// styles to its projections; the cheapest feasible assignment wins.
#include "plan/intra_op.h"

#include <torch/csrc/jit/ir/ir.h>

#include <cmath>
#include <functional>
#include <set>
#include <unordered_map>

#include "core/error.h"
#include "graph/traced_graph.h"
#include "plan/cost_model.h"

namespace slapo::plan {

namespace {

// R: every rank holds all of it. S: each rank holds its part of the features (heads). A: no
// layout (parameters, masks, sizes: they broadcast against either).
enum class Layout { R, S, A };
enum class Style { Replicated, Column, Row };

struct Projection {
  std::string path, type;  // "Linear" or "Conv1D"
  int64_t in = 0, out = 0;
  bool bias = false;
};

const std::set<std::string> kNeedsWhole = {"aten::layer_norm", "aten::mean", "aten::sum", "aten::var",
                                           "aten::norm", "aten::embedding", "aten::cross_entropy_loss"};
const std::set<std::string> kSplits = {"aten::chunk", "aten::split", "aten::unbind", "prim::ListUnpack"};

struct Analysis {
  std::shared_ptr<TracedGraph> graph;
  std::vector<Projection> projections;        // in graph order
  std::vector<const torch::jit::Value*> inputs;  // the value each projection reads
  std::vector<double> matmul_flops;              // the other matmuls (attention's), forward, per step
};

// One propagation: false when an op would see layouts it cannot compute on.
bool propagate(const Analysis& a, const std::vector<Style>& styles, std::map<std::string, int>* groups,
               std::vector<bool>* sharded_matmuls) {
  sharded_matmuls->clear();
  auto& g = *a.graph->graph();
  std::unordered_map<const torch::jit::Value*, Layout> layout;
  std::unordered_map<const torch::jit::Value*, int> origin;  // column projection a sharded value came from
  for (size_t i = 0; i < g.inputs().size(); ++i) layout[g.inputs()[i]] = i == 0 ? Layout::R : Layout::A;
  auto of = [&](const torch::jit::Value* v) {
    auto found = layout.find(v);
    return found == layout.end() ? Layout::A : found->second;
  };
  size_t next_projection = 0;
  for (auto* node : g.nodes()) {
    std::string kind = node->kind().toQualString();
    if (node->kind() == c10::prim::Constant) continue;
    if (kind == "slapo::call_module") {
      auto* list = node->input(1)->node();
      const torch::jit::Value* x = list->inputs().empty() ? nullptr : list->inputs()[0];
      Layout in = x ? of(x) : Layout::A;
      auto id = torch::jit::constant_as<int64_t>(node->input(0));
      std::string path = id ? leaf_path(*id) : "";
      if (next_projection < a.projections.size() && a.projections[next_projection].path == path) {
        Style s = styles[next_projection];
        int index = static_cast<int>(next_projection++);
        if (s == Style::Row) {
          if (in != Layout::S) return false;
          layout[node->output()] = Layout::R;  // the fwd_post all-reduce makes the partial sums whole
        } else {
          if (in == Layout::S) return false;
          layout[node->output()] = s == Style::Column ? Layout::S : Layout::R;
          if (s == Style::Column) origin[node->output()] = index;
        }
      } else {
        layout[node->output()] = in;  // a dropout and other leaves keep the layout
        if (x && origin.count(x)) origin[node->output()] = origin[x];
      }
      continue;
    }
    if (node->kind() == c10::prim::ListConstruct) {
      Layout l = Layout::A;
      if (node->output()->type()->isSubtypeOf(*c10::ListType::ofTensors()))
        for (auto* v : node->inputs())
          if (of(v) != Layout::A) l = of(v);
      layout[node->output()] = l;
      continue;
    }
    // the tensor inputs that carry a layout
    Layout in = Layout::A;
    int from = -1;
    for (auto* v : node->inputs()) {
      Layout l = of(v);
      if (l == Layout::A) continue;
      if (in != Layout::A && l != in) return false;  // a sharded value meets a whole one
      in = l;
      if (origin.count(v)) from = origin[v];
    }
    if (kNeedsWhole.count(kind) && in == Layout::S) return false;
    if (kind == "aten::matmul" || kind == "aten::bmm") sharded_matmuls->push_back(in == Layout::S);
    if (kSplits.count(kind) && in == Layout::S && from >= 0 && groups) {
      int parts = static_cast<int>(node->outputs().size());
      if (kind == "aten::chunk") parts = static_cast<int>(torch::jit::constant_as<int64_t>(node->input(1)).value_or(1));
      if (parts > 1) (*groups)[a.projections[static_cast<size_t>(from)].path] = parts;
    }
    for (auto* out : node->outputs()) {
      // sizes and other numbers computed from an activation carry no layout
      bool tensor = out->type()->cast<c10::TensorType>() || out->type()->isSubtypeOf(*c10::ListType::ofTensors());
      layout[out] = tensor ? in : Layout::A;
      // origin is not passed on: a split counts as the projection's parts only when it splits the
      // projection's own output (GPT-2's c_attn into q, k, v), not a later view of it (rotary's
      // halves of a head)
    }
  }
  for (auto* out : g.outputs())
    if (of(out) == Layout::S) return false;  // the layer hands a whole tensor on
  return true;
}

double plan_seconds(const Analysis& a, const std::vector<Style>& styles, const std::vector<bool>& sharded_matmuls,
                    const IntraOpOptions& o) {
  double total = 0;
  // attention's own matmuls: split over the ranks where the heads are
  for (size_t i = 0; i < a.matmul_flops.size() && i < sharded_matmuls.size(); ++i)
    total += 3.0 * a.matmul_flops[i] / (sharded_matmuls[i] ? o.ranks : 1) / o.flops_per_s;
  std::set<const torch::jit::Value*> reduced;  // inputs whose gradient is all-reduced once already
  for (size_t i = 0; i < a.projections.size(); ++i) {
    auto& p = a.projections[i];
    double flops = 6.0 * o.tokens * double(p.in) * double(p.out);  // forward + backward
    if (styles[i] == Style::Replicated) {
      total += flops / o.flops_per_s;
      continue;
    }
    total += flops / o.ranks / o.flops_per_s;
    // column: the input's gradient all-reduced in backward, once for all the column projections
    // that read the same input (Megatron's f before q, k and v); row: the output in forward
    if (styles[i] == Style::Column && !reduced.insert(a.inputs[i]).second) continue;
    double elements = o.tokens * double(styles[i] == Style::Column ? p.in : p.out);
    total += all_reduce_seconds(elements * o.bytes_per_element, o.ranks, o.bandwidth, o.latency);
  }
  return total;
}

// Every Linear / Conv1D below `m` is a projection; they and the dropouts stay calls in the trace.
void collect_leaves(const std::shared_ptr<Module>& m, const std::string& path, std::vector<TraceLeaf>& leaves,
                    std::map<std::string, Projection>& projections) {
  for (auto& [name, child] : m->children_in_order()) {
    std::string p = path.empty() ? name : path + "." + name;
    const std::string& type = child->type_name();
    if (type == "Linear" || type == "Conv1D" || type == "Dropout") {
      leaves.push_back({m, name, p});
      if (type != "Dropout") {
        auto w = child->param("weight");
        // Linear's weight is [out, in]; GPT-2's Conv1D stores [in, out]
        projections[p] = {p, type, type == "Linear" ? w.size(1) : w.size(0), type == "Linear" ? w.size(0) : w.size(1),
                          child->has_param("bias")};
      }
      continue;
    }
    collect_leaves(child, p, leaves, projections);
  }
}

}  // namespace

IntraOpPlan plan_intra_op(const Module& layer, const std::string& where, const Values& example_inputs,
                          const IntraOpOptions& o) {
  if (o.ranks < 2) throw Error(fmt::format("autoshard: {}: plan for 2 ranks or more, got {}", where, o.ranks));
  auto copy = layer.deep_clone();
  std::vector<TraceLeaf> leaves;
  std::map<std::string, Projection> by_path;
  collect_leaves(copy, "", leaves, by_path);
  if (by_path.empty())
    throw Error(fmt::format("autoshard: {} ({}) has no Linear or Conv1D to shard", where, layer.type_name()));
  Analysis a;
  {
    torch::NoGradGuard no_grad;
    a.graph = trace_module(*copy, where, example_inputs, leaves);
  }
  // the projections in the order the trace calls them
  for (auto* node : a.graph->graph()->nodes()) {
    if (std::string(node->kind().toQualString()) != "slapo::call_module") continue;
    auto id = torch::jit::constant_as<int64_t>(node->input(0));
    auto found = id ? by_path.find(leaf_path(*id)) : by_path.end();
    if (found == by_path.end()) continue;
    a.projections.push_back(found->second);
    auto* list = node->input(1)->node();
    a.inputs.push_back(list->inputs().empty() ? nullptr : list->inputs()[0]);
  }
  // the FLOPs of the other matmuls, from the trace's shapes, scaled from the example's tokens to o.tokens
  {
    auto type = a.graph->graph()->inputs()[0]->type()->cast<c10::TensorType>();
    auto sizes = type ? type->sizes().concrete_sizes() : c10::nullopt;
    double example_tokens = 1;
    if (sizes && sizes->size() >= 2)
      for (size_t i = 0; i + 1 < sizes->size(); ++i) example_tokens *= double((*sizes)[i]);
    for (auto* node : a.graph->graph()->nodes()) {
      std::string kind = node->kind().toQualString();
      if (kind != "aten::matmul" && kind != "aten::bmm") continue;
      auto lhs = node->input(0)->type()->cast<c10::TensorType>();
      auto out_t = node->output()->type()->cast<c10::TensorType>();
      auto lhs_sizes = lhs ? lhs->sizes().concrete_sizes() : c10::nullopt;
      auto out_sizes = out_t ? out_t->sizes().concrete_sizes() : c10::nullopt;
      double flops = 0;
      if (lhs_sizes && out_sizes && !lhs_sizes->empty()) {
        flops = 2.0 * double(lhs_sizes->back());
        for (auto d : *out_sizes) flops *= double(d);
      }
      a.matmul_flops.push_back(flops * o.tokens / example_tokens);
    }
  }
  size_t n = a.projections.size();
  if (n > 12)
    throw Error(fmt::format("autoshard: {} calls {} projections; this pass enumerates up to 12 (3^12 plans)", where, n));
  IntraOpPlan best;
  best.step_s = INFINITY;
  std::vector<Style> styles(n, Style::Replicated);
  std::vector<bool> sharded_matmuls;
  {
    std::map<std::string, int> unused;
    propagate(a, styles, &unused, &sharded_matmuls);
  }
  best.replicated_s = plan_seconds(a, styles, sharded_matmuls, o);
  size_t total = 1;
  for (size_t i = 0; i < n; ++i) total *= 3;
  for (size_t code = 0; code < total; ++code) {
    size_t c = code;
    for (size_t i = 0; i < n; ++i, c /= 3) styles[i] = static_cast<Style>(c % 3);
    // a projection's features must split evenly over the ranks
    bool divisible = true;
    for (size_t i = 0; i < n; ++i) {
      auto& p = a.projections[i];
      if (styles[i] == Style::Column && p.out % o.ranks != 0) divisible = false;
      if (styles[i] == Style::Row && p.in % o.ranks != 0) divisible = false;
    }
    ++best.considered;
    std::map<std::string, int> groups;
    if (!divisible || !propagate(a, styles, &groups, &sharded_matmuls)) continue;
    ++best.feasible;
    double s = plan_seconds(a, styles, sharded_matmuls, o);
    if (s < best.step_s - 1e-15) {
      best.step_s = s;
      best.strategy.clear();
      for (size_t i = 0; i < n; ++i)
        best.strategy[a.projections[i].path] =
            styles[i] == Style::Replicated ? "replicated" : styles[i] == Style::Column ? "column" : "row";
      best.groups = groups;
    }
  }
  if (best.feasible == 0)
    throw Error(fmt::format("autoshard: no assignment of {}'s {} projections is feasible", where, n));
  for (auto& [path, proj] : by_path) {
    best.types[path] = proj.type;
    best.has_bias[path] = proj.bias;
  }
  return best;
}

std::string IntraOpPlan::lua_source() const {
  std::string out = "return function(sch)\n";
  for (auto& [path, style] : strategy) {
    bool linear = types.count(path) && types.at(path) == "Linear";
    auto found = groups.find(path);
    std::string opt = found != groups.end() ? fmt::format(", {{ groups = {} }}", found->second) : "";
    std::string bias = has_bias.count(path) && has_bias.at(path) ? fmt::format(":shard(\"bias\", 0{})", opt) : "";
    if (style == "column")
      out += fmt::format("  sch[\"{}\"]:shard(\"weight\", {}{}){}:sync(\"bwd_post\", \"all_reduce\")\n", path,
                         linear ? 0 : 1, opt, bias);
    else if (style == "row")
      out += fmt::format("  sch[\"{}\"]:shard(\"weight\", {}):sync(\"fwd_post\", \"all_reduce\")\n", path, linear ? 1 : 0);
    else
      out += fmt::format("  -- {} stays replicated\n", path);
  }
  return out + "end\n";
}

}  // namespace slapo::plan
