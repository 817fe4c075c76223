// TorchScript IR's graph types by name only: the planner's graph analyses declare their functions
// with these and keep torch's headers to their sources.
#pragma once

namespace torch::jit {
struct Graph;
struct Node;
struct Value;
}  // namespace torch::jit
