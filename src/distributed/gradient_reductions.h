// fully_shard's gradient reductions in backward, overlapped with the backward that follows (FSDP2's
// order): a unit's reduce-scatters start as soon as its gradients are ready, and land on the
// slices' .grad when the next unit's start or when the backward pass ends, so the reductions of
// one unit are in flight at a time (its whole gradients held that long, no longer).
#pragma once

#include <torch/torch.h>

#include <functional>

namespace slapo {

/// One parameter's reduce-scatter under way.
struct GradientReduction {
  const void* unit = nullptr;          ///< the unit call the gradient comes from
  std::function<at::Tensor()> wait;    ///< this rank's part of the sum, padding rows included
  at::Tensor slice;                    ///< the parameter whose .grad receives it
  int64_t rows = 0;                    ///< the slice's own rows (the part's others are padding)
  int64_t divide_by = 1;               ///< the group's size when averaging, else 1
};

/// This rank's gradient for the slice out of its part of the sum (a tensor of its own, which this
/// may divide in place): the padding rows dropped, divided by `divide_by`; a tensor of its own.
at::Tensor slice_gradient(const at::Tensor& part, int64_t rows, int64_t divide_by);

/// Lands every reduction in flight that is not `unit`'s (null: every one). A unit's backward calls
/// it before starting its own, so one unit's whole gradients are in reduction at a time.
void land_other_units(const void* unit);

/// Lands every reduction of another unit still in flight, then keeps `r` in flight. Called from a
/// backward function: the end of that backward pass (an autograd final callback) lands the rest.
void start_gradient_reduction(GradientReduction r);

/// Runs `backward` (a backward pass). If it fails, the pass never reaches its end, where its
/// reductions land: they are waited for and dropped instead, so none lands in a later pass, and
/// the next pass lands its own at its end again.
void run_backward(const std::function<void()>& backward);

/// What the reductions did so far in this process (tests): `in_flight` now; landed when the next
/// unit's started (`beside_backward`: they ran while its backward computed) or when backward ended;
/// `dropped` after a backward pass that failed.
struct GradientReductionCounts {
  int64_t in_flight = 0, beside_backward = 0, at_end = 0, dropped = 0;
};
GradientReductionCounts gradient_reduction_counts();

}  // namespace slapo
