// Pieces of the training loop that want C++: gradient clipping across shards, the machine's
// measured peak FLOP/s (for MFU), the process's memory.
#pragma once

#include <memory>

#include "core/module.h"

namespace slapo {
namespace dist {
class Group;
}

/// Clips the gradients of `model` to a total L2 norm of `max_norm` and returns the norm before
/// clipping. A split parameter's slices (shard's, fully_shard's, or both) count once: their
/// squared norms are summed over the groups each split records; replicated ones count once.
double clip_grad_norm(Module& model, double max_norm);

/// Measured matmul throughput of this process on `device` in `dtype` (FLOP/s), the denominator of
/// MFU: the best of several rounds of square matmuls (512 on a CPU, 4096 on a GPU, whose
/// small matmuls are launch-bound), each round timed from one device synchronisation to the next.
double measure_peak_flops(at::Device device = at::kCPU, at::ScalarType dtype = at::kFloat);

/// Resident memory of this process in MiB (CPU runs), read from /proc/self/statm.
double resident_memory_mib();

}  // namespace slapo
