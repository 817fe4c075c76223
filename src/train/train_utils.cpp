// Gradient clipping over sharded models, peak FLOP/s and memory readings.
#include "train/train_utils.h"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <unordered_set>

#include <torch/cuda.h>

#include "core/error.h"
#include "core/expert_groups.h"
#include "distributed/group.h"
#include "distributed/split_tensors.h"
#include "distributed/world.h"

namespace slapo {

double clip_grad_norm(Module& model, double max_norm, const GradNormPart& part) {
  // Squares summed by the groups a gradient's slices are spread over (shard's, fully_shard's):
  // each sum goes over those groups once, so every slice counts once and replicas not at all.
  // The sums stay on the gradients' device until the one host read of the norm (a GPU would
  // otherwise wait once per parameter).
  // A rank's own experts (shard_experts) sum over their group the same way: each expert counts once.
  auto splits = splits_by_tensor(model);
  auto experts = expert_group_by_tensor(model);
  std::map<std::vector<int>, std::vector<at::Tensor>> squares;  // by group ids; {}: whole on every rank
  std::vector<at::Tensor> grads;
  torch::NoGradGuard no_grad;
  for (auto& [name, p] : unique_named_parameters(model)) {
    if (!part.held.empty() && !part.held.count(p.unsafeGetTensorImpl())) continue;
    auto found = splits.find(p.unsafeGetTensorImpl());
    auto ids = found == splits.end() ? std::vector<int>{} : split_group_ids(found->second);
    auto expert = experts.find(p.unsafeGetTensorImpl());
    if (expert != experts.end()) ids.push_back(expert->second);
    auto& sq = squares[ids];
    if (!p.grad().defined()) continue;
    grads.push_back(p.grad());
    if (part.counted_elsewhere.count(p.unsafeGetTensorImpl())) continue;
    sq.push_back(p.grad().detach().to(at::kDouble).pow(2).sum());
  }
  at::Tensor total;
  for (auto& [ids, parts] : squares) {  // in the same order on every rank
    at::Tensor s = parts.empty() ? torch::zeros({1}, at::kDouble) : at::stack(parts).sum().reshape({1});
    for (int id : ids) {
      auto over = dist::group_by_id(id);
      if (over->size() > 1) over->all_reduce(s, "clip_grad_norm");
    }
    total = total.defined() ? total + s.to(total.device()) : s;
  }
  if (part.across && part.across->size() > 1) {  // the other ranks' parts of the model
    if (!total.defined()) total = torch::zeros({1}, at::kDouble);
    if (part.share != 1.0) total = total * part.share;
    part.across->all_reduce(total, "clip_grad_norm");
  }
  double norm = total.defined() ? std::sqrt(total.item<double>()) : 0.0;
  double scale = max_norm / (norm + 1e-6);
  if (scale < 1.0)
    for (auto& g : grads) g.mul_(scale);
  return norm;
}

double measure_peak_flops(at::Device device, at::ScalarType dtype) {
  torch::NoGradGuard no_grad;
  bool cuda = device.is_cuda();
  auto sync = [cuda] {
    if (cuda) torch::cuda::synchronize();
  };
  const int64_t n = cuda ? 4096 : 512;
  auto like = torch::TensorOptions().device(device).dtype(dtype);
  auto a = torch::randn({n, n}, like), b = torch::randn({n, n}, like);
  at::mm(a, b);  // warm-up: the library picks its kernel, the device its clocks
  sync();
  double best = 0;
  for (int round = 0; round < 5; ++round) {
    auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < 4; ++i) at::mm(a, b);
    sync();
    double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    best = std::max(best, 4.0 * 2.0 * double(n) * double(n) * double(n) / seconds);
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
