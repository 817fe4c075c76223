// The intra-op pass: the traced module's ops as a selection problem (each op's layouts, their
// costs and memory, the edges that must agree), solved as Alpa's ILP; the layouts are propagated
// once more through the solution to check it and to find where a projection's output is split.
#include "plan/intra_op.h"

#include <torch/csrc/jit/ir/ir.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "core/error.h"
#include "graph/traced_graph.h"
#include "plan/cost_model.h"
#include "plan/saved_tensors.h"
#include "plan/selection_ilp.h"
#include "plan/token_axes.h"

namespace slapo::plan {

namespace {
struct Projection {
  std::string path, type;  // "Linear" or "Conv1D"
  int64_t in = 0, out = 0;
  bool bias = false, tied = false;
};

// Projections that read one input and sit below one module whose own input it is, with no other
// use of it inside that module: when they go column-parallel, one backward all-reduce on that
// module covers them all (Megatron's f before q, k and v).
struct SharedInput {
  std::string parent;                 // the module's path below the traced one
  std::vector<size_t> readers;        // indices into IntraOpAnalysis::projections
};
}  // namespace

// The traced module and what the solver needs of it, kept between solves.
struct IntraOpAnalysis {
  std::shared_ptr<Module> module;                // the traced copy (the graph calls its leaves)
  std::shared_ptr<TracedGraph> graph;
  std::map<std::string, Projection> by_path;
  std::vector<Projection> projections;           // in graph order
  std::vector<const torch::jit::Value*> inputs;  // the value each projection reads
  std::vector<const torch::jit::Value*> outputs; // and the one it returns
  std::set<std::string> dropouts;                // the Dropout leaves' paths
  std::vector<SharedInput> shared;
  double example_tokens = 1;                     // tokens in the traced example
  int64_t example_seq = 0;                       // its sequence length
  int64_t token_axis = -1;                       // the input's sequence dimension (-1: none found)
  TokenAxes token_axes;                          // each value's, with the input split along it
  std::unordered_set<const torch::jit::Value*> saved;  // what autograd keeps for backward
  // graph inputs that are parameters: their paths ("ln_1.weight") and elements
  std::unordered_map<const torch::jit::Value*, std::pair<std::string, double>> params_of;
};

namespace {

using Analysis = IntraOpAnalysis;

// R: every rank holds all of it. S: each rank holds its part of the features (heads). T: each
// rank holds its part of the tokens (sequence parallelism). A: no layout (parameters, masks,
// sizes: they broadcast against any).
enum class Layout { R, S, T, A };
// ColumnGather: column-parallel with its output all-gathered in forward (Megatron's
// gather_output), so it hands on a whole tensor: an LM head before the loss.
// ColumnSeq: column-parallel on a token-split input, all-gathered first (its gradient
// reduce-scattered); RowSeq: row-parallel whose partial sums are reduce-scattered over the tokens
// (Megatron's sequence parallelism). TokenParallel: whole weights on this rank's tokens, their
// gradients all-reduced (Slapo's SR x RR); TokenGather: the same, its output all-gathered over the
// tokens (attention's keys and values, for every rank's queries).
enum class Style { Replicated, Column, Row, ColumnGather, ColumnSeq, RowSeq, TokenParallel, TokenGather };
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

double numel_of(const torch::jit::Value* v) {
  auto sizes = sizes_of(v);
  if (!sizes) return 0;
  double n = 1;
  for (auto d : *sizes) n *= double(d);
  return n;
}

// One strategy of one op: the layout it needs of its inputs, the layout of its output, what it costs.
struct Strategy {
  Layout in = Layout::R, out = Layout::R;
  Style style = Style::Replicated;  // projections only
  double seconds = 0, bytes = 0;
  // what it does, for the planner's summary (IntraOpPlan's shares): its matmul flops, parameters
  // and saved elements, whether the ranks divide its work, and the elements per token it
  // all-reduces over the tensor-parallel axis in forward and in backward
  double flops = 0, params = 0, saved = 0;
  bool split = false;
  double forward_reduced = 0, backward_reduced = 0;
  // Slapo's objective: the elements each rank hands the forward collectives (an all-reduce or a
  // reduce-scatter its whole tensor, an all-gather its part)
  double volume = 0;
  Layout rhs = Layout::A;  // a matmul's right operand, where it needs another layout than `in`
};

// The selection problem for one ZeRO choice: a node per op that reads the module's input (directly
// or through other ops), edges where one such op feeds another.
struct Built {
  SelectionProblem problem;
  std::vector<std::vector<Strategy>> strategies;  // per problem node
  std::vector<int> projection_node;               // per projection: its problem node
  std::vector<int> shared_node;                   // per Analysis::shared: its sync's node (none, all-reduce)
  // Slapo's volume of the module's own split and gather under sequence parallelism: a unit per op
  // that reads the split input, and the output's part all-gathered
  double boundary_volume = 0;
};

// Ops that read a tensor without a gradient flowing back through them.
const std::set<std::string> kShapeOnly = {"aten::size", "aten::dim", "aten::len", "prim::shape", "aten::numel"};

Built build_problem(const Analysis& a, const IntraOpOptions& o, bool zero) {
  Built b;
  const bool sequence = o.sequence == "on";
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
      cost.push_back(o.objective == "volume" ? s.volume * 1e-6 + s.seconds * 1e-7 : s.seconds), memory.push_back(s.bytes);
    b.strategies.push_back(std::move(strategies));
    return b.problem.add_node(std::move(name), cost, memory);
  };
  producer[g.inputs()[0]] = add("input", {Strategy{boundary, boundary}});
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
          return Strategy{in, out, st, seconds, bytes_held, flops, params, out_elements, split, fwd, bwd, volume};
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
              Strategy{}, Strategy{Layout::R, Layout::R, Style::Column, input_sync, 0, 0, 0, 0, false, 0, double(p.in)}};
          if (sequence)
            syncs.push_back(Strategy{Layout::T, Layout::T, Style::ColumnSeq, input_sync, tokens * double(p.in) * bytes,
                                     0, 0, tokens * double(p.in), false, double(p.in) / 2, double(p.in) / 2,
                                     tokens * double(p.in) / o.ranks});
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
      options.push_back({Layout::R, Layout::R, Style::Replicated, seconds, out_elements * bytes, flops, 0, out_elements});
      if (!kNeedsWhole.count(kind))
        options.push_back({Layout::S, Layout::S, Style::Replicated, seconds / o.ranks, out_elements * bytes / o.ranks,
                           flops, 0, out_elements, true});
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
        options.push_back({Layout::T, Layout::T, Style::Replicated,
                           seconds / o.ranks + (param_elements > 0 ? tp_reduce(param_elements) : 0.0),
                           out_elements * bytes / o.ranks, flops, 0, out_elements, true});
      }
      if (sequence && matmul_on_tokens(node, a.token_axes)) {  // this rank's queries, the keys whole
        Strategy rows{Layout::T, Layout::T, Style::Replicated, seconds / o.ranks, out_elements * bytes / o.ranks,
                      flops, 0, out_elements, true};
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

// Every Linear / Conv1D below `m` is a projection; they and the dropouts stay calls in the trace.
// `uses` counts each parameter's modules: a weight tied to another module's (GPT-2's LM head and
// embedding) is not sharded.
void collect_leaves(const std::shared_ptr<Module>& m, const std::string& path,
                    const std::unordered_map<c10::TensorImpl*, int>& uses, std::vector<TraceLeaf>& leaves,
                    std::map<std::string, Projection>& projections, std::set<std::string>& dropouts) {
  for (auto& [name, child] : m->children_in_order()) {
    std::string p = path.empty() ? name : path + "." + name;
    const std::string& type = child->type_name();
    if (type == "Linear" || type == "Conv1D" || type == "Dropout") {
      leaves.push_back({m, name, p});
      if (type == "Dropout") dropouts.insert(p);
      if (type != "Dropout") {
        auto w = child->param("weight");
        // Linear's weight is [out, in]; GPT-2's Conv1D stores [in, out]
        auto found = uses.find(w.unsafeGetTensorImpl());
        projections[p] = {p, type, type == "Linear" ? w.size(1) : w.size(0), type == "Linear" ? w.size(0) : w.size(1),
                          child->has_param("bias"), found != uses.end() && found->second > 1};
      }
      continue;
    }
    collect_leaves(child, p, uses, leaves, projections, dropouts);
  }
}

}  // namespace

std::shared_ptr<Module> module_at(const std::shared_ptr<Module>& root, const std::string& path) {
  std::shared_ptr<Module> m = root;
  size_t start = 0;
  while (m && start <= path.size()) {
    size_t dot = path.find('.', start);
    std::string name = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    m = m->child(name);
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return m;
}

namespace {

std::string parent_of(const std::string& path) {
  auto dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

// For each input read by two projections or more: their nearest common module, traced on its own
// (inputs shaped like its call in the main trace, zeros), must take that input first and use it
// only in those projections (and for its shape).
void find_shared_inputs(Analysis& a, const std::shared_ptr<Module>& root, const std::vector<TraceLeaf>& leaves) {
  std::vector<const torch::jit::Value*> seen;
  for (size_t i = 0; i < a.projections.size(); ++i) {
    const auto* x = a.inputs[i];
    if (!x || std::find(seen.begin(), seen.end(), x) != seen.end()) continue;
    seen.push_back(x);
    SharedInput group;
    for (size_t j = i; j < a.projections.size(); ++j)
      if (a.inputs[j] == x) group.readers.push_back(j);
    if (group.readers.size() < 2) continue;
    group.parent = parent_of(a.projections[group.readers[0]].path);
    for (size_t r : group.readers) {
      const std::string& path = a.projections[r].path;
      while (!group.parent.empty() && path.compare(0, group.parent.size() + 1, group.parent + ".") != 0)
        group.parent = parent_of(group.parent);
    }
    if (group.parent.empty()) continue;  // the traced module itself: its callers own its input
    auto parent = module_at(root, group.parent);
    if (!parent || parent->last_call().empty()) continue;
    Values examples;
    for (auto& arg : parent->last_call()) {
      if (arg.dtype == at::ScalarType::Undefined) break;
      examples.push_back(at::zeros(arg.shape, at::TensorOptions().dtype(arg.dtype)));
    }
    std::vector<TraceLeaf> inner;
    const std::string prefix = group.parent + ".";
    for (auto& leaf : leaves)
      if (leaf.path.compare(0, prefix.size(), prefix) == 0) inner.push_back({leaf.parent, leaf.slot, leaf.path.substr(prefix.size())});
    std::shared_ptr<TracedGraph> traced;
    try {
      torch::NoGradGuard no_grad;
      traced = trace_module(*parent, group.parent, examples, inner);
    } catch (const std::exception&) {
      continue;  // a module that does not trace alone keeps a sync on each projection
    }
    std::set<std::string> wanted;
    for (size_t r : group.readers) wanted.insert(a.projections[r].path.substr(prefix.size()));
    std::set<std::string> found;
    bool alone = true;
    const auto* input = traced->graph()->inputs()[0];
    for (const auto& use : input->uses()) {
      std::string kind = use.user->kind().toQualString();
      if (kShapeOnly.count(kind)) continue;
      bool projection_call = false;
      if (use.user->kind() == c10::prim::ListConstruct && use.user->inputs().size() == 1)
        for (const auto& call : use.user->output()->uses()) {
          if (std::string(call.user->kind().toQualString()) != "slapo::call_module") continue;
          auto id = torch::jit::constant_as<int64_t>(call.user->input(0));
          std::string path = id ? leaf_path(*id) : "";
          if (wanted.count(path)) projection_call = true, found.insert(path);
        }
      alone = alone && projection_call;
    }
    if (alone && found == wanted) a.shared.push_back(group);
  }
}

}  // namespace

IntraOpOptions intra_op_options(const Cluster& cluster, int tp, int dp, const std::string& dtype) {
  IntraOpOptions o;
  o.ranks = tp, o.dp = dp;
  const DeviceProfile& device = cluster.device;
  double seconds = device.matmul_seconds(4096, 4096, 4096, dtype);
  if (!(seconds > 0)) seconds = device.matmul_seconds(4096, 4096, 4096, device.matmul.front().dtype);
  o.flops_per_s = seconds > 0 ? 2.0 * 4096.0 * 4096.0 * 4096.0 / seconds : 1e12;
  o.bandwidth = cluster.intra_bw, o.latency = cluster.intra_latency;
  bool across = tp * dp > cluster.per_node;
  o.dp_bandwidth = across ? cluster.inter_bw : cluster.intra_bw;
  o.dp_latency = across ? cluster.inter_latency : cluster.intra_latency;
  o.zero_sync = zero_sync_all_reduces(device);
  return o;
}

IntraOpPlan plan_intra_op(const Module& module, const std::string& where, const Values& example_inputs,
                          const IntraOpOptions& options) {
  return plan_intra_op_of_copy(module.deep_clone(), where, example_inputs, options);
}

namespace {
void check_options(const IntraOpOptions& o, const std::string& where) {
  if (o.ranks < 2) throw Error(fmt::format("autoshard: {}: plan for 2 ranks or more, got {}", where, o.ranks));
  if (o.dp < 1) throw Error(fmt::format("autoshard: {}: dp must be 1 or more, got {}", where, o.dp));
  if (o.solver != "ilp" && o.solver != "exhaustive")
    throw Error(fmt::format("autoshard: {}: solver must be \"ilp\" or \"exhaustive\", got \"{}\"", where, o.solver));
  if (o.zero != "auto" && o.zero != "on" && o.zero != "off")
    throw Error(fmt::format("autoshard: {}: zero must be \"auto\", \"on\" or \"off\", got \"{}\"", where, o.zero));
  if (o.objective != "time" && o.objective != "volume")
    throw Error(fmt::format("autoshard: {}: objective must be \"time\" or \"volume\", got \"{}\"", where, o.objective));
  if (o.sequence != "on" && o.sequence != "off")
    throw Error(fmt::format("autoshard: {}: sequence must be \"on\" or \"off\", got \"{}\"", where, o.sequence));
}
}  // namespace

IntraOpPlan plan_intra_op_of_copy(const std::shared_ptr<Module>& copy, const std::string& where,
                                  const Values& example_inputs, const IntraOpOptions& o) {
  check_options(o, where);  // before the trace: a misspelt option costs nothing
  return IntraOpProblem(copy, where, example_inputs).solve(o);
}

IntraOpProblem::~IntraOpProblem() = default;

IntraOpProblem::IntraOpProblem(const std::shared_ptr<Module>& copy, const std::string& where,
                               const Values& example_inputs)
    : analysis_(std::make_unique<IntraOpAnalysis>()), where_(where) {
  std::vector<TraceLeaf> leaves;
  std::unordered_map<c10::TensorImpl*, int> uses;
  for (auto& item : copy->named_parameters(true)) ++uses[item.value().unsafeGetTensorImpl()];
  Analysis& a = *analysis_;
  a.module = copy;
  auto& by_path = a.by_path;
  collect_leaves(copy, "", uses, leaves, by_path, a.dropouts);
  if (by_path.empty())
    throw Error(fmt::format("autoshard: {} ({}) has no Linear or Conv1D to shard", where, copy->type_name()));
  try {
    torch::NoGradGuard no_grad;
    a.graph = trace_module(*copy, where, example_inputs, leaves);
  } catch (const Error& e) {
    throw Error(fmt::format("autoshard: {} (inputs: the module's own last inputs, or {{inputs = {{x, ...}}}})", e.what()));
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
    a.outputs.push_back(node->output());
  }
  find_shared_inputs(a, copy, leaves);
  a.saved = saved_for_backward(*a.graph->graph(), [&](const torch::jit::Node* call) {
    auto id = torch::jit::constant_as<int64_t>(call->input(0));
    return id && a.dropouts.count(leaf_path(*id)) > 0;
  });
  // the example's tokens: every dimension of token ids, the leading ones of hidden states
  {
    const at::Tensor& x = example_inputs.front().toTensor();
    a.example_tokens = 1;
    int64_t dims = at::isFloatingType(x.scalar_type()) ? x.dim() - 1 : x.dim();
    for (int64_t i = 0; i < dims; ++i) a.example_tokens *= double(x.size(i));
    a.example_seq = dims > 0 ? x.size(dims - 1) : 0;
    // hidden states [.., sequence, hidden] split along the sequence
    if (at::isFloatingType(x.scalar_type()) && dims > 0 && a.example_seq > 1) a.token_axis = dims - 1;
    if (a.token_axis >= 0) a.token_axes = trace_token_axes(*a.graph->graph(), a.token_axis);
  }
  // the parameters the graph reads, by owning module
  {
    std::unordered_map<const c10::TensorImpl*, std::pair<std::string, double>> owner;
    for (auto& item : copy->named_parameters(true))
      owner.emplace(item.value().unsafeGetTensorImpl(),
                    std::make_pair(item.key(), double(item.value().numel())));
    auto inputs = a.graph->graph()->inputs();
    size_t first_param = a.graph->input_shapes().size();
    for (size_t i = first_param; i < inputs.size() && i - first_param < a.graph->params().size(); ++i) {
      auto found = owner.find(a.graph->params()[i - first_param].unsafeGetTensorImpl());
      if (found != owner.end()) a.params_of[inputs[i]] = found->second;
    }
  }
}

IntraOpPlan IntraOpProblem::solve(const IntraOpOptions& o) const {
  const std::string& where = where_;
  check_options(o, where);
  const Analysis& a = *analysis_;
  if (o.sequence == "on" && a.token_axis < 0)
    throw Error(fmt::format("autoshard: {}: sequence parallelism splits the first input along its tokens, but it has "
                            "none to split (it takes a floating [batch, sequence, hidden] input of 2 tokens or more; "
                            "sequence = false keeps tensors whole)", where));
  std::vector<bool> zero_choices;
  if (o.zero != "on" || o.dp < 2) zero_choices.push_back(false);
  if (o.zero != "off" && o.dp > 1) zero_choices.push_back(true);
  IntraOpPlan best;
  best.step_s = INFINITY;
  double least_bytes = INFINITY, solve_s = 0, best_objective = INFINITY;
  auto solve = [&](const SelectionProblem& problem) {
    return o.solver == "exhaustive" ? solve_selection_exhaustively(problem, "autoshard: " + where)
                                    : solve_selection(problem, "autoshard: " + where);
  };
  for (bool zero : zero_choices) {
    Built b = build_problem(a, o, zero);
    b.problem.memory_budget = o.memory_bytes;
    if (!zero || o.zero == "on") {  // no sharding at all (whole tensors in and out), for comparison
      IntraOpOptions whole_tensors = o;
      whole_tensors.sequence = "off";
      Built rebuilt;  // only under sequence parallelism: else this problem has the whole layouts
      if (o.sequence == "on") rebuilt = build_problem(a, whole_tensors, zero);
      const Built& whole = o.sequence == "on" ? rebuilt : b;
      best.replicated_s = best.replicated_memory_bytes = 0;
      for (auto& strategies : whole.strategies)
        best.replicated_s += strategies[0].seconds, best.replicated_memory_bytes += strategies[0].bytes;
    }
    auto solve_start = std::chrono::steady_clock::now();
    Selection s = solve(b.problem);
    solve_s += std::chrono::duration<double>(std::chrono::steady_clock::now() - solve_start).count();
    if (!s.feasible()) {
      // the least memory any assignment needs, for the error: the same problem minimising bytes
      SelectionProblem bytes = b.problem;
      bytes.memory_budget = INFINITY;
      for (auto& n : bytes.nodes)
        for (size_t i = 0; i < n.cost.size(); ++i) n.cost[i] = std::isfinite(n.cost[i]) ? n.memory[i] : INFINITY;
      least_bytes = std::min(least_bytes, solve(bytes).cost);
      continue;
    }
    if (!(s.cost < best_objective - 1e-15)) continue;
    best_objective = s.cost, best.zero = zero, best.solver = s.solver;
    best.step_s = 0, best.volume = b.boundary_volume;
    best.variables = s.variables, best.constraints = s.constraints;
    best.projections = static_cast<int>(a.projections.size());
    best.ops = static_cast<int>(b.problem.nodes.size() - 1 - a.shared.size()) - best.projections;
    best.memory_bytes = 0;
    best.flops = best.split_flops = best.params = best.split_params = best.saved = best.split_saved = 0;
    best.forward_reduced_per_token = best.backward_reduced_per_token = 0;
    for (size_t v = 0; v < b.problem.nodes.size(); ++v) {
      best.memory_bytes += b.problem.nodes[v].memory[size_t(s.choice[v])];
      const Strategy& st = b.strategies[v][size_t(s.choice[v])];
      best.step_s += st.seconds, best.volume += st.volume;
      best.flops += st.flops, best.params += st.params, best.saved += st.saved;
      if (st.split && st.style != Style::TokenParallel && st.style != Style::TokenGather) best.split_params += st.params;
      if (st.split) best.split_flops += st.flops;
      if (st.split && (st.out == Layout::S || st.out == Layout::T)) best.split_saved += st.saved;
      best.forward_reduced_per_token += st.forward_reduced;
      best.backward_reduced_per_token += st.backward_reduced;
    }
    std::vector<Style> styles;
    for (size_t i = 0; i < a.projections.size(); ++i) {
      auto v = static_cast<size_t>(b.projection_node[i]);
      styles.push_back(b.strategies[v][static_cast<size_t>(s.choice[v])].style);
    }
    // the layouts propagated once more: a check of the solution, and where c_attn's parts are
    best.groups.clear(), best.forked.clear(), best.token_params.clear();
    best.sequence = o.sequence == "on", best.token_axis = a.token_axis;
    if (!propagate(a, styles, best.sequence ? Layout::T : Layout::R, &best.groups, &best.forked, &best.token_params))
      throw std::logic_error("autoshard: the ILP's choice for " + where + " does not propagate");
    best.parent_syncs.clear(), best.parent_gathers.clear();
    for (size_t k = 0; k < a.shared.size(); ++k) {
      int chosen = s.choice[size_t(b.shared_node[k])];
      for (size_t r : a.shared[k].readers)
        if (chosen == 1) best.parent_syncs[a.projections[r].path] = a.shared[k].parent;
        else if (chosen == 2) best.parent_gathers[a.projections[r].path] = a.shared[k].parent;
    }
    best.strategy.clear();
    best.gather_axes.clear();
    for (size_t i = 0; i < styles.size(); ++i) {
      best.strategy[a.projections[i].path] = style_name(styles[i]);
      if (styles[i] == Style::TokenGather) best.gather_axes[a.projections[i].path] = a.token_axes.at(a.outputs[i]);
    }
  }
  if (!std::isfinite(best.step_s)) {
    if (std::isfinite(least_bytes))
      throw Error(fmt::format("autoshard: {} needs at least {:.1f} MiB per device on {} x {} ranks (tp x dp{}); "
                              "memory_mib is {:.3g}", where, least_bytes / double(1 << 20), o.ranks, o.dp,
                              zero_choices.back() ? ", ZeRO-1" : "", o.memory_bytes / double(1 << 20)));
    throw Error(fmt::format("autoshard: no assignment of {}'s {} projections is feasible", where, a.projections.size()));
  }
  best.solve_s = solve_s;
  for (auto& [path, proj] : a.by_path) {
    best.types[path] = proj.type;
    best.has_bias[path] = proj.bias;
  }
  return best;
}

}  // namespace slapo::plan
