// Whole tensors from the slices shard and fully_shard keep, and slices from whole tensors.
#include "distributed/split_tensors.h"

#include "distributed/group.h"
#include "distributed/world.h"

namespace slapo {

at::Tensor gather_whole(const Splits& splits, at::Tensor local, const char* caller) {
  for (auto it = splits.rbegin(); it != splits.rend(); ++it) {
    const ShardSpec& spec = **it;
    local = spec.regroup(dist::group_by_id(spec.group_id)->all_gather(spec.padded(local), spec.axis, caller));
  }
  return local;
}

at::Tensor local_part(const Splits& splits, at::Tensor whole) {
  for (const ShardSpec* spec : splits) whole = spec->local(whole);
  return whole;
}

std::vector<int> split_group_ids(const Splits& splits) {
  std::vector<int> ids;
  for (const ShardSpec* spec : splits) ids.push_back(spec->group_id);
  return ids;
}

}  // namespace slapo
