// Gradient clipping over sharded models, peak FLOP/s and memory readings.
#include "train/train_utils.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <unordered_set>

#include "core/error.h"
#include "dist/group.h"
#include "dist/world.h"

namespace slapo {

namespace {
// The group a model's slices are summed over when the caller names none: the world, when every
// sharded parameter is split into world-size parts (no other group has that many ranks); else
// which group is meant cannot be told, and the caller must say.
std::shared_ptr<dist::Group> default_shard_group(Module& model,
                                                 const std::unordered_map<c10::TensorImpl*, const ShardSpec*>& sharded) {
  auto world = dist::world();
  for (auto& [name, p] : unique_named_parameters(model)) {
    auto found = sharded.find(p.unsafeGetTensorImpl());
    if (found == sharded.end() || found->second->parts == 1 || found->second->parts == world->size()) continue;
    throw Error(fmt::format("clip_grad_norm: '{}' is split into {} parts but the world has {} ranks, so its norm "
                            "needs the group it is split over: clip_grad_norm(model, max_norm, group) (in "
                            "slapo.train: group = or layout =)",
                            name, found->second->parts, world->size()));
  }
  return world;
}
}  // namespace

double clip_grad_norm(Module& model, double max_norm, std::shared_ptr<dist::Group> group) {
  auto sharded = shard_specs_by_tensor(model);
  if (!group && !sharded.empty()) group = default_shard_group(model, sharded);
  double replicated_sq = 0, sharded_sq = 0;
  std::vector<at::Tensor> grads;
  for (auto& [name, p] : unique_named_parameters(model)) {
    if (!p.grad().defined()) continue;
    double sq = p.grad().detach().to(at::kDouble).pow(2).sum().item<double>();
    (sharded.count(p.unsafeGetTensorImpl()) ? sharded_sq : replicated_sq) += sq;
    grads.push_back(p.grad());
  }
  if (group && group->size() > 1) {
    at::Tensor s = torch::full({1}, sharded_sq, at::kDouble);
    group->all_reduce(s, "clip_grad_norm");
    sharded_sq = s.item<double>();
  }
  double norm = std::sqrt(replicated_sq + sharded_sq);
  double scale = max_norm / (norm + 1e-6);
  if (scale < 1.0) {
    torch::NoGradGuard no_grad;
    for (auto& g : grads) g.mul_(scale);
  }
  return norm;
}

double measure_peak_flops() {
  torch::NoGradGuard no_grad;
  const int64_t n = 512;
  auto a = torch::randn({n, n}), b = torch::randn({n, n});
  at::mm(a, b);  // warm-up
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 4; ++i) at::mm(a, b);
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 4.0 * 2.0 * n * n * n / seconds);
  }
  return best;
}

double resident_memory_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages_total = 0, pages_resident = 0;
  statm >> pages_total >> pages_resident;
  return static_cast<double>(pages_resident) * static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1024.0 * 1024.0);
}

}  // namespace slapo
