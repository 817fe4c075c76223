// The intra-op pass's second job: the traced module's ops as a selection problem (each op's
// layouts, their costs and memory, the edges that must agree), and the propagation that checks a
// solution. Internal to the pass (intra_op.cpp solves it).
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "plan/intra_op.h"
#include "plan/intra_op_analysis.h"
#include "plan/selection_ilp.h"

namespace slapo::plan::intra {

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

  // Named construction: Strategy::laid_out(R, S, Style::Column).costing(s, bytes).doing(...)
  static Strategy laid_out(Layout in, Layout out, Style style = Style::Replicated) {
    Strategy s;
    s.in = in, s.out = out, s.style = style;
    return s;
  }
  Strategy& costing(double seconds_, double bytes_) {
    seconds = seconds_, bytes = bytes_;
    return *this;
  }
  Strategy& doing(double flops_, double params_, double saved_, bool split_) {
    flops = flops_, params = params_, saved = saved_, split = split_;
    return *this;
  }
  Strategy& reducing(double forward, double backward) {
    forward_reduced = forward, backward_reduced = backward;
    return *this;
  }
  Strategy& moving(double volume_) {
    volume = volume_;
    return *this;
  }
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

/// The problem for one ZeRO choice under `o`.
Built build_problem(const Analysis& a, const IntraOpOptions& o, bool zero);

/// One propagation from the module's input in `boundary` (R, or T: sequence parallel) with each
/// projection in `styles`: false when an op would see layouts it cannot compute on. `forked` gets
/// the dropouts that see split tensors, `token_params` the parameters used on this rank's tokens
/// alone, `groups` the column projections whose output is split into parts.
bool propagate(const Analysis& a, const std::vector<Style>& styles, Layout boundary, std::map<std::string, int>* groups,
               std::set<std::string>* forked, std::set<std::string>* token_params);

/// The style's name in the pass's record ("column", "row_seq", ...).
const char* style_name(Style s);

}  // namespace slapo::plan::intra
