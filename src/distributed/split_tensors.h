// Whole tensors from the slices shard and fully_shard keep, and slices from whole tensors.
#pragma once

#include "core/module.h"

namespace slapo {

/// The whole tensor from every rank's `local` slice (a parameter, or its gradient): fully_shard's
/// slices gathered over its group, then shard's over its own. A collective over each group.
at::Tensor gather_whole(const Splits& splits, at::Tensor local, const char* caller);

/// This rank's slice of `whole`, as the splits keep it.
at::Tensor local_part(const Splits& splits, at::Tensor whole);

/// The groups a split tensor's slices are spread over, outermost first (their ids).
std::vector<int> split_group_ids(const Splits& splits);

}  // namespace slapo
