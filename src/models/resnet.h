// ResNet and Wide-ResNet with torchvision's module names (conv1, bn1, layer1.0.conv2, fc, ...),
// so Slapo's CNN schedules and Alpa's Wide-ResNet benchmark have their model.
#pragma once

#include <array>
#include <string>
#include <vector>

#include "core/module.h"
#include "models/zoo.h"

namespace slapo {

struct ResNetConfig {
  std::string block = "bottleneck";  ///< "basic" (ResNet-18/34) or "bottleneck" (50 and up)
  std::array<int64_t, 4> layers{3, 4, 6, 3};
  int64_t groups = 1, width_per_group = 64, num_classes = 1000, in_channels = 3;

  /// resnet18, resnet34, resnet50, resnet101, wide_resnet50_2, wide_resnet101_2.
  static ResNetConfig preset(const std::string& name);
  static std::vector<std::string> preset_names();
};

/// torchvision's ResNet: conv1, bn1, relu, maxpool, layer1..4 of BasicBlock or Bottleneck, avgpool,
/// fc; convolutions initialised as torchvision does (kaiming normal, fan-out), norms to 1 and 0.
std::shared_ptr<Module> build_resnet(const ResNetConfig& config, const BuildOptions& options = {});

/// torchvision's initialisation of a tree's Conv2d (kaiming normal, fan-out, ReLU gain) and
/// BatchNorm2d (weight 1, bias 0) layers; other modules are left as they are.
void init_weights_vision(Module& root);

}  // namespace slapo
