// Which of a traced module's tensors autograd keeps for backward: the activation memory a training
// step holds at the end of forward. A matmul keeps its operands, softmax its output, an addition
// nothing; a view keeps the tensor it views. The intra-op pass counts these in its memory row,
// where counting every op's output would charge attention's scores three times over.
#pragma once

#include <functional>
#include <unordered_set>

#include "plan/jit_ir_fwd.h"

namespace slapo::plan {

/// The values computed in `g` whose memory autograd keeps for backward (a view's base in place of
/// the view). `is_dropout(node)`: a leaf call that keeps its mask (counted as its output); every
/// other leaf call is a projection, which keeps its input. An op this does not know keeps its
/// output, as before anything was known.
std::unordered_set<const torch::jit::Value*> saved_for_backward(
    const torch::jit::Graph& g, const std::function<bool(const torch::jit::Node*)>& is_dropout);

}  // namespace slapo::plan
