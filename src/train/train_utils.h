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
/// clipping. Sharded parameters (ModuleMeta::shards, fully_sharded) count once across `group`:
/// their squared norms are summed over the group, replicated ones are counted once. Without a
/// group, the world when every split parameter has world-size parts; else an error that asks for it.
double clip_grad_norm(Module& model, double max_norm, std::shared_ptr<dist::Group> group);

/// Measured float32 matmul throughput of this process (FLOP/s), the denominator of MFU.
double measure_peak_flops();

/// Resident memory of this process in MiB (CPU runs), read from /proc/self/statm.
double resident_memory_mib();

}  // namespace slapo
