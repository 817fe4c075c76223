// Convolutional layers with torchvision's class names and shapes: what ResNet and Wide-ResNet
// are made of.
#pragma once

#include <array>

#include "core/module.h"

namespace slapo {

/// y = conv2d(x, W) + b, weight [out, in / groups, kh, kw] (torch.nn.Conv2d). Sharded along its
/// input channels (weight axis 1) with a whole bias, the bias is added after the sync, as a
/// row-parallel Linear's.
class Conv2d : public ModuleBase<Conv2d> {
 public:
  struct Options {
    std::array<int64_t, 2> kernel{3, 3}, stride{1, 1}, padding{0, 0}, dilation{1, 1};
    int64_t groups = 1;
    bool bias = true;
  };
  Conv2d(int64_t in, int64_t out, const Options& o, const at::TensorOptions& opts = {});
  std::string describe() const override;
  /// PyTorch's default initialisation (kaiming uniform with a = sqrt(5), bias from the fan-in).
  void reset_parameters();
  const Options options;

 protected:
  Value forward(Values args) override;
  Value finish(Value out) override;
};

/// Batch normalisation over channels of [N, C, H, W] with running statistics (buffers
/// running_mean, running_var, num_batches_tracked), as torch.nn.BatchNorm2d.
class BatchNorm2d : public ModuleBase<BatchNorm2d> {
 public:
  BatchNorm2d(int64_t n, double eps, double momentum, const at::TensorOptions& opts = {});
  std::string describe() const override;
  const double eps, momentum;

 protected:
  Value forward(Values args) override;
};

class MaxPool2d : public ModuleBase<MaxPool2d> {
 public:
  MaxPool2d(std::array<int64_t, 2> kernel, std::array<int64_t, 2> stride, std::array<int64_t, 2> padding);
  std::string describe() const override;
  const std::array<int64_t, 2> kernel, stride, padding;

 protected:
  Value forward(Values args) override;
};

class AdaptiveAvgPool2d : public ModuleBase<AdaptiveAvgPool2d> {
 public:
  explicit AdaptiveAvgPool2d(std::array<int64_t, 2> output_size);
  std::string describe() const override;
  const std::array<int64_t, 2> output_size;

 protected:
  Value forward(Values args) override;
};

}  // namespace slapo
