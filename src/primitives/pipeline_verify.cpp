// verify of a pipelined schedule: the pipeline's step against the unscheduled model, on every rank.
#include <cmath>
#include <map>

#include "core/error.h"
#include "distributed/split_tensors.h"
#include "distributed/world.h"
#include "primitives/pipeline.h"
#include "primitives/verify_checks.h"

namespace slapo {

VerifyReport verify_pipeline(Pipeline& pipe, Module& reference, Values inputs, const at::Tensor& labels,
                             const VerifyOptions& o, NamedTensors keywords) {
  if (o.train)
    throw Error("verify: a pipeline is compared in eval mode (its micro-batches draw dropout masks in another order "
                "than the whole batch); drop train = true");
  auto world = dist::world();
  check_same_weights(reference, world);
  for (auto& v : inputs) v = same_on_all_ranks(v, world);
  for (auto& [name, t] : keywords) t = same_on_all_ranks(t, world).toTensor();
  at::Tensor target = same_on_all_ranks(labels, world).toTensor();
  pipe.prepare(inputs, keywords);  // the stages, and so this rank's parameters, are known from the trace
  auto model = pipe.module();
  bool was_training = model->is_training();
  model->eval();
  reference.eval();
  for (auto& p : reference.parameters()) p.mutable_grad() = at::Tensor();
  for (auto& p : pipe.parameters()) p.mutable_grad() = at::Tensor();

  VerifyReport report;
  at::Tensor expected = pipe.reference_loss(reference, inputs, target, keywords);
  expected.backward();
  double loss = pipe.step(inputs, target, keywords);
  model->train(was_training);
  double want = expected.item<double>();
  double loss_diff = std::abs(loss - want);
  report.max_output_diff = loss_diff;
  std::string problem;
  if (loss_diff > o.rtol * std::abs(want) + (o.atol >= 0 ? o.atol : 1e-5 * std::max(1.0, std::abs(want))))
    problem = fmt::format("verify: the pipeline's loss is {:.7g}, the unscheduled model's {:.7g} (difference {:g})",
                          loss, want, loss_diff);
  else
    report.outputs = 1;

  // This rank's stage gradients against the reference's; split ones gathered over their groups.
  auto splits = splits_by_tensor(*model);
  auto ref_params = reference.named_parameters();
  for (auto& [name, param] : pipe.named_parameters()) {
    at::Tensor g = param.grad().defined() ? param.grad() : torch::zeros_like(param);
    auto split = splits.find(param.unsafeGetTensorImpl());
    if (split != splits.end())  // collectives of the TP and fully_shard groups, whose ranks hold the same stage
      g = gather_whole(split->second, g, "verify");
    const at::Tensor* ref = ref_params.find(name);
    if (!ref) {
      ++report.skipped_params;
      continue;
    }
    at::Tensor rg = ref->grad().defined() ? ref->grad() : torch::zeros_like(*ref);
    if (!problem.empty()) continue;
    double diff = g.sizes() == rg.sizes() ? max_abs_diff(g, rg) : -1;
    report.max_grad_diff = std::max(report.max_grad_diff, diff);
    if (!close(rg, g, o))
      problem = fmt::format("verify: the gradient of '{}' differs in pipeline stage {} (max abs difference {:g}, shape "
                            "[{}] vs [{}])",
                            name, pipe.stage(), diff, fmt::join(g.sizes(), ", "), fmt::join(rg.sizes(), ", "));
    else
      ++report.gradients;
  }
  for (auto& p : reference.parameters()) p.mutable_grad() = at::Tensor();
  for (auto& p : pipe.parameters()) p.mutable_grad() = at::Tensor();
  if (any_rank(!problem.empty(), world))
    throw Error(problem.empty() ? "verify: another rank's pipeline stage found a mismatch" : problem);
  return report;
}

}  // namespace slapo
