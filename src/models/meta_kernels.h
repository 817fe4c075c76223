// Shapes-only (meta device) kernels LibTorch lacks in C++, so that a model built on the meta
// device runs forward: the planner traces one layer that way without paging in its weights.
#pragma once

namespace slapo {

/// Registers, once per process, the meta kernels LibTorch's C++ library does not have (its own
/// come from Python): aten::native_layer_norm. Safe to call from any thread, any number of times.
void register_meta_kernels();

}  // namespace slapo
