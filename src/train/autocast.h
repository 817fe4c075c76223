// Mixed precision: autocast on CPU and CUDA across LibTorch's two APIs (per-device functions in
// 1.x, a device-type argument in 2.x), and the loss scaler float16 training needs.
#pragma once

#include <torch/torch.h>

#include <string>
#include <vector>

namespace slapo {

/// "bf16" | "bfloat16" | "fp16" | "float16" -> the dtype; errors name `fn` and the choices.
at::ScalarType autocast_dtype_from_name(const std::string& name, const char* fn);

/// Autocast in `dtype` while alive, for CUDA ops when a GPU is usable and for CPU ops when the dtype
/// is bfloat16 (LibTorch's CPU autocast); restores both devices' previous modes when destroyed.
/// float16 without a GPU raises, naming `fn`.
class AutocastScope {
 public:
  AutocastScope(at::ScalarType dtype, const char* fn);
  ~AutocastScope();
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool cpu_was_, cuda_was_;
  at::ScalarType cpu_dtype_was_, cuda_dtype_was_;
};

/// Dynamic loss scaling for float16 (torch.cuda.amp.GradScaler's rule): the loss is multiplied by
/// `scale` before backward; gradients are divided by it before the step; a step whose gradients
/// hold an inf or NaN is skipped and the scale halved; after `growth_interval` clean steps in a
/// row the scale doubles.
class GradScaler {
 public:
  explicit GradScaler(double init_scale = 65536.0, double growth_factor = 2.0, double backoff_factor = 0.5,
                      int64_t growth_interval = 2000);
  at::Tensor scale(const at::Tensor& loss) const { return loss * scale_; }
  /// Divides every defined gradient by the scale in place; true when one holds an inf or NaN.
  bool unscale(const std::vector<at::Tensor>& params) const;
  /// After a step: halves the scale on `found_inf`, else counts toward the next growth.
  void update(bool found_inf);
  double value() const { return scale_; }
  /// Steps without an overflow since the scale last changed: training checkpoints keep it with
  /// the scale, so a resumed run grows and backs off on the same steps.
  int64_t clean_steps() const { return clean_steps_; }
  void set_state(double scale, int64_t clean_steps) {
    scale_ = scale;
    clean_steps_ = clean_steps;
  }

 private:
  double scale_, growth_, backoff_;
  int64_t interval_, clean_steps_ = 0;
};

}  // namespace slapo
