// Pieces of the training loop that want C++: gradient clipping across shards, the machine's
// measured peak FLOP/s (for MFU), the process's memory.
#pragma once

#include <memory>
#include <unordered_set>

#include "core/module.h"

namespace slapo {
namespace dist {
class Group;
}

/// The part of a model's gradients this rank clips when other ranks hold the rest (a pipeline's
/// stages): the parameters it holds, those of them another rank counts in the norm (a weight tied
/// across stages, whose summed gradient each of its stages holds), and the ranks whose sums add up
/// to the whole norm. Empty `held`: every parameter of the model. `share`: the weight of this
/// rank's sum in that addition, 1 / the number of ranks of `across` that hold the same sum (the
/// ranks of a stage's mesh, when stages run on meshes of their own).
struct GradNormPart {
  std::unordered_set<const c10::TensorImpl*> held;
  std::unordered_set<const c10::TensorImpl*> counted_elsewhere;
  std::shared_ptr<dist::Group> across;
  double share = 1.0;
};

/// Clips the gradients of `model` to a total L2 norm of `max_norm` and returns the norm before
/// clipping. A split parameter's slices (shard's, fully_shard's, or both) count once: their
/// squared norms are summed over the groups each split records; replicated ones count once.
/// `part`: this rank's share of a model spread over `part.across` (every rank of it calls).
double clip_grad_norm(Module& model, double max_norm, const GradNormPart& part = {});

/// Measured matmul throughput of this process on `device` in `dtype` (FLOP/s), the denominator of
/// MFU: the best of several rounds of square matmuls (512 on a CPU, 4096 on a GPU, whose
/// small matmuls are launch-bound), each round timed from one device synchronisation to the next.
double measure_peak_flops(at::Device device = at::kCPU, at::ScalarType dtype = at::kFloat);

/// Resident memory of this process in MiB (CPU runs), read from /proc/self/statm.
double resident_memory_mib();

}  // namespace slapo
