// The intra-op pass's cost table and propagation (intra_op_costs.h).
#include "plan/intra_op_costs.h"

#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "plan/cost_model.h"
#include "plan/saved_tensors.h"
#include "plan/token_axes.h"

namespace slapo::plan::intra {

namespace {

bool is_column(Style s) { return s == Style::Column || s == Style::ColumnGather || s == Style::ColumnSeq; }
Layout input_of(Style s) {
  switch (s) {
    case Style::Row: case Style::RowSeq: return Layout::S;
    case Style::ColumnSeq: case Style::TokenParallel: case Style::TokenGather: return Layout::T;
    default: return Layout::R;
  }
}
Layout output_of(Style s) {
  switch (s) {
    case Style::Column: case Style::ColumnSeq: return Layout::S;
    case Style::RowSeq: case Style::TokenParallel: return Layout::T;
    default: return Layout::R;
  }
}
}  // namespace

const char* style_name(Style s) {
  switch (s) {
    case Style::Replicated: return "replicated";
    case Style::Column: return "column";
    case Style::Row: return "row";
    case Style::ColumnGather: return "column_gather";
    case Style::ColumnSeq: return "column_seq";
    case Style::RowSeq: return "row_seq";
    case Style::TokenParallel: return "token_parallel";
    case Style::TokenGather: return "token_gather";
  }
  return "?";
}

namespace {

const std::set<std::string> kNeedsWhole = {"aten::layer_norm", "aten::mean", "aten::sum", "aten::var",
                                           "aten::norm", "aten::embedding", "aten::cross_entropy_loss"};
const std::set<std::string> kSplits = {"aten::chunk", "aten::split", "aten::unbind", "prim::ListUnpack"};

bool is_tensor_value(const torch::jit::Value* v) {
  return v->type()->cast<c10::TensorType>() || v->type()->isSubtypeOf(*c10::ListType::ofTensors());
}

// Whether `node` can compute on token-split tensors (token_axes.h); `carries`: the inputs that
// have a layout, the others broadcast.
bool token_ok(const IntraOpAnalysis& a, const torch::jit::Node* node,
              const std::function<bool(const torch::jit::Value*)>& carries) {
  return a.token_axis >= 0 && computes_on_tokens(node, a.token_axes, carries);
}

// One propagation from the module's input in `boundary` (R, or T: sequence parallel): false when an
// op would see layouts it cannot compute on. `forked` gets the dropouts that see split tensors:
// each rank's heads or tokens need their own masks. `token_params` gets the parameters ops use on
// this rank's tokens alone ("ln_1.weight"): their gradients are all-reduced.
}  // namespace

bool propagate(const Analysis& a, const std::vector<Style>& styles, Layout boundary, std::map<std::string, int>* groups,
               std::set<std::string>* forked, std::set<std::string>* token_params) {
  auto& g = *a.graph->graph();
  std::unordered_map<const torch::jit::Value*, Layout> layout;
  std::unordered_map<const torch::jit::Value*, int> origin;  // column projection a sharded value came from
  for (size_t i = 0; i < g.inputs().size(); ++i) layout[g.inputs()[i]] = i == 0 ? boundary : Layout::A;
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
        // a row's fwd_post all-reduce (reduce-scatter) makes the partial sums whole (token-split);
        // a column-gather's all-gather makes its output whole
        if (in != input_of(s)) return false;
        layout[node->output()] = output_of(s);
        if (output_of(s) == Layout::S) origin[node->output()] = index;
      } else {
        layout[node->output()] = in;  // a dropout and other leaves keep the layout
        if ((in == Layout::S || in == Layout::T) && a.dropouts.count(path)) forked->insert(path);
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
    // attention on this rank's queries: the left operand's tokens against a whole right operand
    if ((kind == "aten::matmul" || kind == "aten::bmm") && of(node->input(0)) == Layout::T) {
      if (of(node->input(1)) == Layout::S || of(node->input(1)) == Layout::T) return false;
      if (!matmul_on_tokens(node, a.token_axes)) return false;
      layout[node->output()] = Layout::T;
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
    if (in == Layout::T) {
      if (!token_ok(a, node, [&](const torch::jit::Value* v) { return of(v) != Layout::A; })) return false;
      for (auto* v : node->inputs()) {
        auto param = a.params_of.find(v);
        if (param != a.params_of.end()) token_params->insert(param->second.first);
      }
    }
    if (kSplits.count(kind) && in == Layout::S && from >= 0 && groups) {
      int parts = static_cast<int>(node->outputs().size());
      if (kind == "aten::chunk") parts = static_cast<int>(torch::jit::constant_as<int64_t>(node->input(1)).value_or(1));
      if (parts > 1) (*groups)[a.projections[static_cast<size_t>(from)].path] = parts;
    }
    for (auto* out : node->outputs()) {
      layout[out] = is_tensor_value(out) ? in : Layout::A;  // sizes computed from an activation carry none
      // origin is not passed on: a split counts as the projection's parts only when it splits the
      // projection's own output (GPT-2's c_attn into q, k, v), not a later view of it (rotary's
      // halves of a head)
    }
  }
  for (auto* out : g.outputs())
    if (of(out) != Layout::A && of(out) != boundary) return false;  // it hands on what it was given
  return true;
}

namespace {

double numel_of(const torch::jit::Value* v) {
  auto sizes = sizes_of(v);
  if (!sizes) return 0;
  double n = 1;
  for (auto d : *sizes) n *= double(d);
  return n;
}






}  // namespace

Built build_problem(const Analysis& a, const IntraOpOptions& o, bool zero) {
  Built b;
  const bool sequence = o.sequence;
  const Layout boundary = sequence ? Layout::T : Layout::R;
  auto& g = *a.graph->graph();
  const double tokens = o.tokens / o.dp;  // per tensor-parallel group
  const double scale = tokens / a.example_tokens;
  // A tensor grows with the tokens; one with the sequence length in two dimensions (attention's
  // scores) grows with the sequence once more for each dimension past the first.
  const double seq_growth = o.seq > 0 && a.example_seq > 1 ? o.seq / double(a.example_seq) : 1.0;
  auto scale_of = [&](const torch::jit::Value* v) {
    auto sizes = sizes_of(v);
    int seq_dims = 0;
    if (sizes)
      for (auto d : *sizes) seq_dims += d == a.example_seq;
    return seq_dims > 1 ? scale * std::pow(seq_growth, seq_dims - 1) : scale;
  };
  const double bytes = o.bytes_per_element;
  std::unordered_map<const torch::jit::Value*, int> producer;  // a value that carries a layout -> its node
  auto add = [&](std::string name, std::vector<Strategy> strategies) {
    std::vector<double> cost, memory;
    // Slapo's objective in millions of elements (the solver counts in millionths), time breaking ties
    for (auto& s : strategies)
      cost.push_back(o.objective == Objective::Volume ? s.volume * 1e-6 + s.seconds * 1e-7 : s.seconds), memory.push_back(s.bytes);
    b.strategies.push_back(std::move(strategies));
    return b.problem.add_node(std::move(name), cost, memory);
  };
  producer[g.inputs()[0]] = add("input", {Strategy::laid_out(boundary, boundary)});
  // the gradient of `elements` parameters all-reduced over the data-parallel axis
  auto weight_sync = [&](double elements) {
    if (o.dp < 2) return 0.0;
    return all_reduce_seconds(elements * bytes, o.dp, o.dp_bandwidth, o.dp_latency) * (zero ? o.zero_sync : 1.0);
  };
  // parameters, their gradients and AdamW's two float32 moments (sharded under ZeRO-1)
  auto weight_bytes = [&](double elements) { return elements * (2 * bytes + 8.0 / (zero ? o.dp : 1)); };
  // an all-reduce of `elements` over the tensor-parallel axis
  auto tp_reduce = [&](double elements) { return all_reduce_seconds(elements * bytes, o.ranks, o.bandwidth, o.latency); };
  std::vector<int> group_of(a.projections.size(), -1);
  for (size_t k = 0; k < a.shared.size(); ++k)
    for (size_t r : a.shared[k].readers) group_of[r] = static_cast<int>(k);
  b.shared_node.assign(a.shared.size(), -1);
  size_t next_projection = 0;
  for (auto* node : g.nodes()) {
    if (node->kind() == c10::prim::Constant) continue;
    std::vector<int> from;  // the nodes whose outputs this one reads
    for (auto* v : node->inputs()) {
      auto found = producer.find(v);
      if (found != producer.end() && std::find(from.begin(), from.end(), found->second) == from.end())
        from.push_back(found->second);
    }
    if (from.empty()) continue;  // parameters, sizes, masks: no layout to choose
    std::string kind = node->kind().toQualString();
    // the tensors it writes that backward needs (saved_tensors.h)
    double out_elements = 0;
    for (auto* out : node->outputs())
      if (a.saved.count(out)) out_elements += numel_of(out) * scale_of(out);
    std::vector<Strategy> options;
    std::string name = kind;
    bool projection = false;
    if (kind == "slapo::call_module") {
      auto id = torch::jit::constant_as<int64_t>(node->input(0));
      std::string path = id ? leaf_path(*id) : "";
      name = path;
      if (next_projection < a.projections.size() && a.projections[next_projection].path == path) {
        projection = true;
        auto& p = a.projections[next_projection];
        double params = double(p.in) * double(p.out) + (p.bias ? double(p.out) : 0.0);
        double flops = 6.0 * tokens * double(p.in) * double(p.out);  // forward + backward
        // what every style shares: the work and weights, split but for the replicated one
        const bool grouped = group_of[next_projection] >= 0;
        auto style = [&](Layout in, Layout out, Style st, double seconds, double bytes_held) {
          bool split = st != Style::Replicated;
          // activation elements per token reduced over the tp axis, in all-reduces (a gather or a
          // reduce-scatter is half of one)
          double fwd = st == Style::Row ? double(p.out)
                       : st == Style::ColumnGather || st == Style::RowSeq || st == Style::TokenGather ? double(p.out) / 2
                       : st == Style::ColumnSeq && !grouped ? double(p.in) / 2 : 0.0;
          double bwd = st == Style::RowSeq || st == Style::TokenGather ? double(p.out) / 2
                       : st == Style::ColumnSeq ? (grouped ? 0.0 : double(p.in) / 2)
                       : is_column(st) && !grouped ? double(p.in) : 0.0;
          // the forward collective's elements per rank: all-reduced or reduce-scattered whole,
          // all-gathered in parts
          double volume = st == Style::Row || st == Style::RowSeq ? tokens * double(p.out)
                          : st == Style::ColumnGather || st == Style::TokenGather ? tokens * double(p.out) / o.ranks
                          : st == Style::ColumnSeq && !grouped ? tokens * double(p.in) / o.ranks : 0.0;
          return Strategy::laid_out(in, out, st).costing(seconds, bytes_held).doing(flops, params, out_elements, split)
              .reducing(fwd, bwd).moving(volume);
        };
        options.push_back(style(Layout::R, Layout::R, Style::Replicated, flops / o.flops_per_s + weight_sync(params),
                                weight_bytes(params) + out_elements * bytes));
        double shared = flops / o.ranks / o.flops_per_s + weight_sync(params / o.ranks);
        double input_sync = tp_reduce(tokens * double(p.in));
        int group = group_of[next_projection];
        if (group >= 0 && b.shared_node[size_t(group)] < 0) {  // one sync for the group, on their module
          // none; the input's gradient all-reduced; or (sequence parallel) the input's tokens
          // all-gathered, kept for backward, and their gradient reduce-scattered
          std::vector<Strategy> syncs = {
              Strategy{}, Strategy::laid_out(Layout::R, Layout::R, Style::Column).costing(input_sync, 0).reducing(0, double(p.in))};
          if (sequence)
            syncs.push_back(Strategy::laid_out(Layout::T, Layout::T, Style::ColumnSeq)
                                .costing(input_sync, tokens * double(p.in) * bytes)
                                .doing(0, 0, tokens * double(p.in), false)
                                .reducing(double(p.in) / 2, double(p.in) / 2)
                                .moving(tokens * double(p.in) / o.ranks));
          b.shared_node[size_t(group)] = add("sync " + a.shared[size_t(group)].parent, std::move(syncs));
        }
        if (!p.tied && p.out % o.ranks == 0) {
          // column: the input's gradient all-reduced in backward (by the group's node when shared)
          double column = shared + (group >= 0 ? 0.0 : input_sync);
          options.push_back(style(Layout::R, Layout::S, Style::Column, column,
                                  weight_bytes(params / o.ranks) + out_elements * bytes / o.ranks));
          // and its output all-gathered in forward (half an all-reduce)
          options.push_back(style(Layout::R, Layout::R, Style::ColumnGather,
                                  column + tp_reduce(tokens * double(p.out)) / 2,
                                  weight_bytes(params / o.ranks) + out_elements * bytes));
        }
        if (!p.tied && p.in % o.ranks == 0)  // row: the partial outputs all-reduced in forward
          options.push_back(style(Layout::S, Layout::R, Style::Row,
                                  shared + tp_reduce(tokens * double(p.out)),
                                  weight_bytes(params / o.ranks) + out_elements * bytes));
        if (sequence && !p.tied) {
          // column on gathered tokens: the gather's all-gather forward and reduce-scatter backward
          // (one all-reduce; the group's node carries it when the input is shared), the gathered
          // input kept for backward
          if (p.out % o.ranks == 0)
            options.push_back(style(Layout::T, Layout::S, Style::ColumnSeq, shared + (grouped ? 0.0 : input_sync),
                                    weight_bytes(params / o.ranks) + out_elements * bytes / o.ranks +
                                        (grouped ? 0.0 : tokens * double(p.in) * bytes)));
          // row, its partial sums reduce-scattered over the tokens (the gradient all-gathered);
          // its whole bias sees this rank's tokens, so the bias's gradient is all-reduced
          if (p.in % o.ranks == 0)
            options.push_back(style(Layout::S, Layout::T, Style::RowSeq,
                                    shared + tp_reduce(tokens * double(p.out)) + (p.bias ? tp_reduce(double(p.out)) : 0),
                                    weight_bytes(params / o.ranks) + out_elements * bytes / o.ranks));
          // whole weights on this rank's tokens: their gradients all-reduced
          double token_parallel = flops / o.ranks / o.flops_per_s + weight_sync(params) + tp_reduce(params);
          options.push_back(style(Layout::T, Layout::T, Style::TokenParallel, token_parallel,
                                  weight_bytes(params) + out_elements * bytes / o.ranks));
          // and its output all-gathered over the tokens (the gradient reduce-scattered): keys
          // and values whole for every rank's queries
          if (a.token_axes.count(node->output()) && a.token_axes.at(node->output()) >= 0)
            options.push_back(style(Layout::T, Layout::R, Style::TokenGather,
                                    token_parallel + tp_reduce(tokens * double(p.out)),
                                    weight_bytes(params) + out_elements * bytes));
        }
        b.projection_node.push_back(static_cast<int>(b.problem.nodes.size()));
        ++next_projection;
      }
    }
    if (!projection) {
      double flops = 0;  // element-wise work is left out, as Alpa does: every layout splits it alike
      if (kind == "aten::matmul" || kind == "aten::bmm") {
        auto lhs = node->input(0)->type()->cast<c10::TensorType>();
        auto lhs_sizes = lhs ? lhs->sizes().concrete_sizes() : c10::nullopt;
        if (lhs_sizes && !lhs_sizes->empty()) {
          // the reduced dimension grows too when it is the sequence (attention's context)
          double reduced = double(lhs_sizes->back()) * (lhs_sizes->back() == a.example_seq ? seq_growth : 1.0);
          flops = 3.0 * 2.0 * reduced * numel_of(node->output()) * scale_of(node->output());
        }
      }
      double seconds = flops / o.flops_per_s;
      options.push_back(Strategy::laid_out(Layout::R, Layout::R).costing(seconds, out_elements * bytes)
                            .doing(flops, 0, out_elements, false));
      if (!kNeedsWhole.count(kind))
        options.push_back(Strategy::laid_out(Layout::S, Layout::S).costing(seconds / o.ranks, out_elements * bytes / o.ranks)
                              .doing(flops, 0, out_elements, true));
      bool tokenwise = kind == "slapo::call_module" ? a.dropouts.count(name) > 0  // a dropout leaf
                       : token_ok(a, node, [&](const torch::jit::Value* v) { return producer.count(v) > 0; });
      if (sequence && tokenwise) {
        // on this rank's tokens; the parameters it reads (a norm's) see only those: their
        // gradients are all-reduced over the tensor-parallel ranks
        double param_elements = 0;
        for (auto* v : node->inputs()) {
          auto param = a.params_of.find(v);
          if (param != a.params_of.end()) param_elements += param->second.second;
        }
        options.push_back(Strategy::laid_out(Layout::T, Layout::T)
                              .costing(seconds / o.ranks + (param_elements > 0 ? tp_reduce(param_elements) : 0.0),
                                       out_elements * bytes / o.ranks)
                              .doing(flops, 0, out_elements, true));
      }
      if (sequence && matmul_on_tokens(node, a.token_axes)) {  // this rank's queries, the keys whole
        Strategy rows = Strategy::laid_out(Layout::T, Layout::T)
                            .costing(seconds / o.ranks, out_elements * bytes / o.ranks)
                            .doing(flops, 0, out_elements, true);
        rows.rhs = Layout::R;
        options.push_back(rows);
      }
    }
    // the module hands on tensors laid out as it was given them
    for (auto* out : g.outputs())
      for (auto* produced : node->outputs())
        if (out == produced)
          for (auto& s : options)
            if (s.out != boundary) s.seconds = INFINITY;
    int v = add(name, options);
    if (projection && group_of[next_projection - 1] >= 0) {  // the group's sync runs iff it goes column
      int sync = b.shared_node[size_t(group_of[next_projection - 1])];
      SelectionProblem::Edge e{sync, v, {}};
      // none: no column reader; all-reduce: columns on whole input; gather: columns on its tokens
      for (auto& sync_choice : b.strategies[size_t(sync)])
        for (auto& sv : b.strategies[size_t(v)]) {
          bool fits = sync_choice.style == Style::Replicated ? !is_column(sv.style)
                      : sync_choice.style == Style::Column  ? is_column(sv.style) && sv.style != Style::ColumnSeq
                                                            : sv.style == Style::ColumnSeq;
          e.cost.push_back(fits ? 0.0 : INFINITY);
        }
      b.problem.edges.push_back(std::move(e));
    }
    for (int u : from) {  // an op computes on the layout its producers hand it, or not at all
      std::vector<size_t> slots;  // the inputs u produces
      for (size_t i = 0; i < node->inputs().size(); ++i) {
        auto found = producer.find(node->input(i));
        if (found != producer.end() && found->second == u) slots.push_back(i);
      }
      SelectionProblem::Edge e{u, v, {}};
      for (auto& su : b.strategies[static_cast<size_t>(u)])
        for (auto& sv : b.strategies[static_cast<size_t>(v)]) {
          bool fits = true;
          for (size_t i : slots) fits = fits && su.out == (i == 1 && sv.rhs != Layout::A ? sv.rhs : sv.in);
          e.cost.push_back(fits ? 0.0 : INFINITY);
        }
      b.problem.edges.push_back(std::move(e));
    }
    for (auto* out : node->outputs())
      if (is_tensor_value(out)) producer[out] = v;
  }
  if (sequence) {
    for (const auto& use : g.inputs()[0]->uses())
      if (!kShapeOnly.count(use.user->kind().toQualString())) b.boundary_volume += 1;
    for (auto* out : g.outputs()) b.boundary_volume += numel_of(out) * scale_of(out) / o.ranks;
  }
  return b;
}


}  // namespace slapo::plan::intra
