#include "train/autocast.h"

#include <torch/version.h>  // TORCH_VERSION_MAJOR: the LibTorch 2.x paths
#include <ATen/autocast_mode.h>

#include "core/error.h"

namespace slapo {

namespace {

#if TORCH_VERSION_MAJOR >= 2
bool enabled(at::DeviceType d) { return at::autocast::is_autocast_enabled(d); }
at::ScalarType dtype_of(at::DeviceType d) { return at::autocast::get_autocast_dtype(d); }
void set(at::DeviceType d, bool on, at::ScalarType dtype) {
  at::autocast::set_autocast_enabled(d, on);
  at::autocast::set_autocast_dtype(d, dtype);
}
#else
bool enabled(at::DeviceType d) { return d == at::kCPU ? at::autocast::is_cpu_enabled() : at::autocast::is_enabled(); }
at::ScalarType dtype_of(at::DeviceType d) {
  return d == at::kCPU ? at::autocast::get_autocast_cpu_dtype() : at::autocast::get_autocast_gpu_dtype();
}
void set(at::DeviceType d, bool on, at::ScalarType dtype) {
  if (d == at::kCPU) {
    at::autocast::set_cpu_enabled(on);
    at::autocast::set_autocast_cpu_dtype(dtype);
  } else {
    at::autocast::set_enabled(on);
    at::autocast::set_autocast_gpu_dtype(dtype);
  }
}
#endif

}  // namespace

at::ScalarType autocast_dtype_from_name(const std::string& name, const char* fn) {
  if (name == "bf16" || name == "bfloat16") return at::kBFloat16;
  if (name == "fp16" || name == "float16") return at::kHalf;
  throw Error(fmt::format("{}: unknown autocast dtype '{}' (valid: bf16, bfloat16, fp16, float16)", fn, name));
}

AutocastScope::AutocastScope(at::ScalarType dtype, const char* fn)
    : cpu_was_(enabled(at::kCPU)),
      cuda_was_(enabled(at::kCUDA)),
      cpu_dtype_was_(dtype_of(at::kCPU)),
      cuda_dtype_was_(dtype_of(at::kCUDA)) {
  const bool gpu = torch::cuda::is_available();
  if (dtype == at::kHalf && !gpu)
    throw Error(fmt::format("{}: float16 autocast runs on CUDA and no GPU is usable here; CPU autocast takes bf16",
                            fn));
  if (gpu) set(at::kCUDA, true, dtype);
  if (dtype == at::kBFloat16) set(at::kCPU, true, dtype);
}

AutocastScope::~AutocastScope() {
  set(at::kCPU, cpu_was_, cpu_dtype_was_);
  set(at::kCUDA, cuda_was_, cuda_dtype_was_);
  if (!cpu_was_ && !cuda_was_) at::autocast::clear_cache();  // casts of weights live one outermost scope
}

GradScaler::GradScaler(double init_scale, double growth_factor, double backoff_factor, int64_t growth_interval)
    : scale_(init_scale), growth_(growth_factor), backoff_(backoff_factor), interval_(growth_interval) {
  if (!(init_scale > 0) || !(growth_factor > 1) || !(backoff_factor > 0 && backoff_factor < 1) || growth_interval < 1)
    throw Error(fmt::format("grad_scaler: need init_scale > 0, growth_factor > 1, 0 < backoff_factor < 1 and "
                            "growth_interval >= 1; got {}, {}, {}, {}",
                            init_scale, growth_factor, backoff_factor, growth_interval));
}

bool GradScaler::unscale(const std::vector<at::Tensor>& params) const {
  torch::NoGradGuard no_grad;
  // one flag per device, read once at the end (one host sync, not one per gradient)
  std::vector<at::Tensor> flags;
  for (auto& p : params) {
    if (!p.grad().defined()) continue;
    auto g = p.mutable_grad();
    g.mul_(1.0 / scale_);
    auto bad = g.isfinite().logical_not().any();
    bool merged = false;
    for (auto& f : flags)
      if (f.device() == bad.device()) {
        f.logical_or_(bad);
        merged = true;
      }
    if (!merged) flags.push_back(bad);
  }
  for (auto& f : flags)
    if (f.item<bool>()) return true;
  return false;
}

void GradScaler::update(bool found_inf) {
  if (found_inf) {
    scale_ *= backoff_;
    clean_steps_ = 0;
  } else if (++clean_steps_ >= interval_) {
    scale_ *= growth_;
    clean_steps_ = 0;
  }
}

}  // namespace slapo
