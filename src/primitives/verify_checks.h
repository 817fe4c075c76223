// The comparisons verify makes, shared by verify_against and the pipeline's verify: inputs made
// identical across ranks, tolerances, and failures decided by every rank together.
#pragma once

#include <memory>

#include "core/module.h"
#include "distributed/group.h"
#include "primitives/verify.h"

namespace slapo {

/// Rank 0's inputs on every rank, so random inputs drawn per rank cannot make a false mismatch.
Value same_on_all_ranks(const Value& v, const std::shared_ptr<dist::Group>& g);
double max_abs_diff(const at::Tensor& a, const at::Tensor& b);
/// The absolute tolerance for `reference`: the option, or 1e-5 x its largest magnitude.
double atol_for(const at::Tensor& reference, const VerifyOptions& o);
bool close(const at::Tensor& ref, const at::Tensor& got, const VerifyOptions& o);
/// True on every rank when `failed` is true on any: ranks decide together, so none waits in a
/// collective that the others skipped.
bool any_rank(bool failed, const std::shared_ptr<dist::Group>& g);
/// The unscheduled model must be the same on every rank, or sharding slices different tensors.
void check_same_weights(Module& reference, const std::shared_ptr<dist::Group>& g);

}  // namespace slapo
