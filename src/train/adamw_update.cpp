#include "train/adamw_update.h"

#include <torch/version.h>  // TORCH_VERSION_MAJOR: the LibTorch 2.x paths
#include <array>
#include <cmath>
#include <map>

#include "core/error.h"
#include "train/optimizer_state.h"

namespace slapo {

namespace {

using Lists4 = std::array<std::vector<at::Tensor>, 4>;  // params, grads, exp_avgs, exp_avg_sqs

bool fused_on_cpu(const at::Tensor& p, const at::Tensor& g, const at::Tensor& m, const at::Tensor& v) {
  auto ok = [&](const at::Tensor& t) {
    return t.device().is_cpu() && t.scalar_type() == p.scalar_type() && t.is_contiguous() && t.numel() == p.numel();
  };
  return (p.scalar_type() == at::kFloat || p.scalar_type() == at::kDouble) && ok(p) && ok(g) && ok(m) && ok(v);
}

void foreach_update(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v, const AdamWHyper& h) {
  const double bias1 = 1 - std::pow(h.beta1, static_cast<double>(h.step));
  const double bias2 = 1 - std::pow(h.beta2, static_cast<double>(h.step));
  if (h.weight_decay != 0) at::_foreach_mul_(p, 1 - h.lr * h.weight_decay);
  at::_foreach_mul_(m, h.beta1);
  at::_foreach_add_(m, g, 1 - h.beta1);
  at::_foreach_mul_(v, h.beta2);
  at::_foreach_addcmul_(v, g, g, 1 - h.beta2);
  auto denom = at::_foreach_sqrt(v);
  at::_foreach_div_(denom, std::sqrt(bias2));
  at::_foreach_add_(denom, h.eps);
  at::_foreach_addcdiv_(p, m, denom, -h.lr / bias1);
}

#if TORCH_VERSION_MAJOR >= 2
// ATen's fused AdamW (one launch for every tensor) reads the step from a tensor on the device.
void fused_update_cuda(at::TensorList p, at::TensorList g, at::TensorList m, at::TensorList v, const AdamWHyper& h) {
  auto step = at::full({}, static_cast<double>(h.step), p[0].options().dtype(at::kFloat));
  std::vector<at::Tensor> steps(p.size(), step);
  at::_fused_adamw_(p, g, m, v, {}, steps, h.lr, h.beta1, h.beta2, h.weight_decay, h.eps, /*amsgrad=*/false,
                    /*maximize=*/false);
}
#endif

}  // namespace

AdamWImpl adamw_impl_from_name(const std::string& name, const char* fn) {
  if (name == "auto") return AdamWImpl::Auto;
  if (name == "fused") return AdamWImpl::Fused;
  if (name == "foreach") return AdamWImpl::Foreach;
  if (name == "loop") return AdamWImpl::Loop;
  throw Error(fmt::format("{}: unknown impl '{}' (valid: auto, fused, foreach, loop)", fn, name));
}

void adamw_update(const std::vector<at::Tensor>& params, const std::vector<at::Tensor>& grads,
                  const std::vector<at::Tensor>& exp_avgs, const std::vector<at::Tensor>& exp_avg_sqs,
                  const AdamWHyper& h, AdamWImpl impl) {
  torch::NoGradGuard no_grad;
  if (params.empty()) return;
  if (impl == AdamWImpl::Loop) throw Error("adamw_update: the per-parameter loop is torch::optim::AdamW's own step");
  // The fused paths take what they can; the rest goes through the foreach ops, grouped by device
  // and dtype as those ops require.
  std::map<std::pair<std::string, at::ScalarType>, Lists4> rest;
  for (size_t i = 0; i < params.size(); ++i) {
    const auto &p = params[i], &g = grads[i], &m = exp_avgs[i], &v = exp_avg_sqs[i];
    if (impl != AdamWImpl::Foreach && fused_on_cpu(p, g, m, v)) {
      at::Tensor pi = p, mi = m, vi = v;
      kernels::cpu::adamw_step(pi, g, mi, vi, h);
      continue;
    }
    auto& lists = rest[{p.device().str(), p.scalar_type()}];
    lists[0].push_back(p), lists[1].push_back(g), lists[2].push_back(m), lists[3].push_back(v);
  }
  for (auto& [key, l] : rest) {
#if TORCH_VERSION_MAJOR >= 2
    if (impl != AdamWImpl::Foreach && l[0][0].is_cuda()) {
      fused_update_cuda(l[0], l[1], l[2], l[3], h);
      continue;
    }
#endif
    foreach_update(l[0], l[1], l[2], l[3], h);
  }
}

at::Tensor MultiTensorAdamW::step(LossClosure closure) {
  if (impl_ == AdamWImpl::Loop) return torch::optim::AdamW::step(std::move(closure));
  torch::NoGradGuard no_grad;
  at::Tensor loss;
  if (closure) {
    at::AutoGradMode enable_grad(true);
    loss = closure();
  }
  for (auto& group : param_groups()) {
    auto& o = static_cast<torch::optim::AdamWOptions&>(group.options());
    if (o.amsgrad()) throw Error("optim.adamw: amsgrad is not supported by the multi-tensor AdamW");
    // parameters that share a step count update together (all of them, unless some had no
    // gradient on some steps)
    std::map<int64_t, Lists4> by_step;
    for (auto& p : group.params()) {
      if (!p.grad().defined()) continue;
      if (p.grad().is_sparse()) throw Error("optim.adamw: sparse gradients are not supported");
      auto key = optimizer_state_key(p);
      auto& slot = state()[key];
      if (!slot) {
        auto s = std::make_unique<torch::optim::AdamWParamState>();
        s->step(0);
        s->exp_avg(torch::zeros_like(p, at::MemoryFormat::Preserve));
        s->exp_avg_sq(torch::zeros_like(p, at::MemoryFormat::Preserve));
        slot = std::move(s);
      }
      auto& s = static_cast<torch::optim::AdamWParamState&>(*slot);
      s.step(s.step() + 1);
      auto& lists = by_step[s.step()];
      lists[0].push_back(p), lists[1].push_back(p.grad()), lists[2].push_back(s.exp_avg()),
          lists[3].push_back(s.exp_avg_sq());
    }
    for (auto& [step, l] : by_step) {
      AdamWHyper h{o.lr(), std::get<0>(o.betas()), std::get<1>(o.betas()), o.eps(), o.weight_decay(), step};
      adamw_update(l[0], l[1], l[2], l[3], h, impl_);
    }
  }
  return loss;
}

}  // namespace slapo
