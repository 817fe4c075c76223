// Where a traced module's tokens lie when its input arrives split along them (sequence
// parallelism): each value's token dimension, carried through views, transposes and matmuls, and
// whether an op computes correctly on this rank's tokens alone. The intra-op pass asks this of
// every op before it offers the op a token-split layout.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>
#include <vector>

#include "plan/jit_ir_fwd.h"

namespace slapo::plan {

/// The concrete sizes of a traced tensor value, when the trace recorded them.
std::optional<std::vector<int64_t>> sizes_of(const torch::jit::Value* v);
/// A list of constant ints: a constant, or a list built of constants (a trace's dims).
std::optional<std::vector<int64_t>> int_list(const torch::jit::Value* v);

/// Per value computed from the graph's first input: the dimension that holds its tokens when that
/// input is split along `input_axis`; -1 where the op mixes tokens (a view that merges them, a
/// matmul that reduces over them).
using TokenAxes = std::unordered_map<const torch::jit::Value*, int64_t>;
TokenAxes trace_token_axes(const torch::jit::Graph& g, int64_t input_axis);

/// Whether `node` computes each token on its own: an element-wise op, a norm, a softmax or a
/// reduction over other dimensions, a view that keeps the tokens in one dimension, a size of
/// another dimension. `split(v)`: whether input `v` arrives token-split; every other tensor input
/// must broadcast along the tokens (a padding mask [b, 1, 1, s] may, a causal mask [s, s] or a
/// rotary table [s, d] may not: each rank's rows would need their offset).
bool computes_on_tokens(const torch::jit::Node* node, const TokenAxes& axes,
                        const std::function<bool(const torch::jit::Value*)>& split);

/// Whether a matmul or bmm may compute on its left operand's tokens with its right operand whole
/// (attention's scores and context on this rank's queries, the keys and values gathered).
bool matmul_on_tokens(const torch::jit::Node* node, const TokenAxes& axes);

}  // namespace slapo::plan
