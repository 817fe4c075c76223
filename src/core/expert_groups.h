// Which parameters shard_experts spread over ranks, and over which group: read by clipping (the
// gradient norm sums each rank's own experts over their group) and by the Lua bindings.
#pragma once

#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "core/module.h"

namespace slapo {

/// The MoE blocks below `root` whose experts shard_experts spread (ModuleMeta::expert_group), as
/// (path below root, group id), in module order.
std::vector<std::pair<std::string, int>> expert_parallel_blocks(const Module& root);

/// The group id of every parameter below such a block's `experts`, by tensor.
std::unordered_map<const c10::TensorImpl*, int> expert_group_by_tensor(const Module& root);

}  // namespace slapo
