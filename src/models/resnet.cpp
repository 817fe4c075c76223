// ResNet / Wide-ResNet as torchvision builds them (torchvision/models/resnet.py's structure).
#include "models/resnet.h"

#include <cmath>

#include "core/error.h"
#include "models/layers.h"
#include "models/vision_layers.h"

namespace slapo {

namespace {

std::shared_ptr<Conv2d> conv(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t groups,
                             const at::TensorOptions& opts) {
  Conv2d::Options o;
  o.kernel = {k, k};
  o.stride = {stride, stride};
  o.padding = {k / 2, k / 2};
  o.groups = groups;
  o.bias = false;
  return std::make_shared<Conv2d>(in, out, o, opts);
}

std::shared_ptr<BatchNorm2d> bn(int64_t n, const at::TensorOptions& opts) {
  return std::make_shared<BatchNorm2d>(n, 1e-5, 0.1, opts);
}

// relu(bn2(conv2(relu(bn1(conv1(x)))))) + shortcut, then relu; expansion 1.
class BasicBlock : public ModuleBase<BasicBlock> {
 public:
  BasicBlock(int64_t inplanes, int64_t planes, int64_t stride, std::shared_ptr<Module> downsample,
             const at::TensorOptions& opts)
      : ModuleBase("BasicBlock") {
    set_child("conv1", conv(inplanes, planes, 3, stride, 1, opts));
    set_child("bn1", bn(planes, opts));
    set_child("relu", std::make_shared<Activation>("ReLU", "relu"));
    set_child("conv2", conv(planes, planes, 3, 1, 1, opts));
    set_child("bn2", bn(planes, opts));
    if (downsample) set_child("downsample", std::move(downsample));
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "BasicBlock", "input");
    auto out = call("relu", call("bn1", call("conv1", x)));
    out = call("bn2", call("conv2", out));
    auto identity = has_child("downsample") ? call("downsample", x) : x;
    return call("relu", out + identity);
  }
};

// 1x1 reduce, 3x3 (strided, grouped), 1x1 expand (x4), each with BatchNorm; torchvision's V1.5
// puts the stride on the 3x3.
class Bottleneck : public ModuleBase<Bottleneck> {
 public:
  Bottleneck(int64_t inplanes, int64_t planes, int64_t stride, std::shared_ptr<Module> downsample, int64_t groups,
             int64_t base_width, const at::TensorOptions& opts)
      : ModuleBase("Bottleneck") {
    int64_t width = planes * base_width / 64 * groups;
    set_child("conv1", conv(inplanes, width, 1, 1, 1, opts));
    set_child("bn1", bn(width, opts));
    set_child("conv2", conv(width, width, 3, stride, groups, opts));
    set_child("bn2", bn(width, opts));
    set_child("conv3", conv(width, planes * 4, 1, 1, 1, opts));
    set_child("bn3", bn(planes * 4, opts));
    set_child("relu", std::make_shared<Activation>("ReLU", "relu"));
    if (downsample) set_child("downsample", std::move(downsample));
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "Bottleneck", "input");
    auto out = call("relu", call("bn1", call("conv1", x)));
    out = call("relu", call("bn2", call("conv2", out)));
    out = call("bn3", call("conv3", out));
    auto identity = has_child("downsample") ? call("downsample", x) : x;
    return call("relu", out + identity);
  }
};

class ResNet : public ModuleBase<ResNet> {
 public:
  ResNet(const ResNetConfig& c, const at::TensorOptions& opts) : ModuleBase("ResNet") {
    if (c.block != "basic" && c.block != "bottleneck")
      throw Error(fmt::format("models.resnet: block must be \"basic\" or \"bottleneck\", got \"{}\"", c.block));
    for (auto n : c.layers)
      if (n < 1 || n > 1000) throw Error(fmt::format("models.resnet: each of layers must be 1 .. 1000, got {}", n));
    if (c.groups < 1 || c.width_per_group < 1 || c.num_classes < 1 || c.in_channels < 1)
      throw Error("models.resnet: groups, width_per_group, num_classes and in_channels must be at least 1");
    if (c.block == "basic" && (c.groups != 1 || c.width_per_group != 64))
      throw Error("models.resnet: BasicBlock supports only groups = 1 and width_per_group = 64 (as torchvision)");
    const int64_t expansion = c.block == "basic" ? 1 : 4;
    set_child("conv1", conv(c.in_channels, 64, 7, 2, 1, opts));
    set_child("bn1", bn(64, opts));
    set_child("relu", std::make_shared<Activation>("ReLU", "relu"));
    set_child("maxpool", std::make_shared<MaxPool2d>(std::array<int64_t, 2>{3, 3}, std::array<int64_t, 2>{2, 2},
                                                     std::array<int64_t, 2>{1, 1}));
    int64_t inplanes = 64;
    const int64_t planes[4] = {64, 128, 256, 512};
    for (int i = 0; i < 4; ++i) {
      std::vector<std::shared_ptr<Module>> blocks;
      int64_t stride = i == 0 ? 1 : 2;
      for (int64_t b = 0; b < c.layers[static_cast<size_t>(i)]; ++b) {
        int64_t s = b == 0 ? stride : 1;
        std::shared_ptr<Module> downsample;
        if (b == 0 && (s != 1 || inplanes != planes[i] * expansion))
          downsample = std::make_shared<Sequential>(std::vector<std::shared_ptr<Module>>{
              conv(inplanes, planes[i] * expansion, 1, s, 1, opts), bn(planes[i] * expansion, opts)});
        if (c.block == "basic")
          blocks.push_back(std::make_shared<BasicBlock>(inplanes, planes[i], s, downsample, opts));
        else
          blocks.push_back(std::make_shared<Bottleneck>(inplanes, planes[i], s, downsample, c.groups,
                                                        c.width_per_group, opts));
        inplanes = planes[i] * expansion;
      }
      set_child(fmt::format("layer{}", i + 1), std::make_shared<Sequential>(blocks));
    }
    set_child("avgpool", std::make_shared<AdaptiveAvgPool2d>(std::array<int64_t, 2>{1, 1}));
    set_child("fc", std::make_shared<Linear>(512 * expansion, c.num_classes, true, opts));
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "ResNet", "pixel_values");
    x = call("maxpool", call("relu", call("bn1", call("conv1", x))));
    for (int i = 1; i <= 4; ++i) x = call(fmt::format("layer{}", i), x);
    x = call("avgpool", x).flatten(1);
    return call("fc", x);
  }
};

}  // namespace

ResNetConfig ResNetConfig::preset(const std::string& name) {
  ResNetConfig c;
  if (name == "resnet18") c.block = "basic", c.layers = {2, 2, 2, 2};
  else if (name == "resnet34") c.block = "basic", c.layers = {3, 4, 6, 3};
  else if (name == "resnet50") c.layers = {3, 4, 6, 3};
  else if (name == "resnet101") c.layers = {3, 4, 23, 3};
  else if (name == "wide_resnet50_2") c.layers = {3, 4, 6, 3}, c.width_per_group = 128;
  else if (name == "wide_resnet101_2") c.layers = {3, 4, 23, 3}, c.width_per_group = 128;
  else
    throw Error(fmt::format("models.resnet: unknown preset '{}' (presets: {})", name, fmt::join(preset_names(), ", ")));
  return c;
}

std::vector<std::string> ResNetConfig::preset_names() {
  return {"resnet18", "resnet34", "resnet50", "resnet101", "wide_resnet50_2", "wide_resnet101_2"};
}

void init_weights_vision(Module& root) {
  torch::NoGradGuard no_grad;
  std::function<void(Module&)> visit = [&](Module& m) {
    if (dynamic_cast<Conv2d*>(&m)) {
      auto w = m.param("weight");  // kaiming normal, fan-out, ReLU gain: std = sqrt(2 / fan_out)
      double fan_out = static_cast<double>(w.size(0) * w.size(2) * w.size(3));
      w.normal_(0.0, std::sqrt(2.0 / fan_out));
      if (m.has_param("bias")) m.param("bias").zero_();
    } else if (dynamic_cast<BatchNorm2d*>(&m)) {
      m.param("weight").fill_(1.0);
      m.param("bias").zero_();
    }
    for (auto& [name, child] : m.children_in_order()) visit(*child);
  };
  visit(root);
}

std::shared_ptr<Module> build_resnet(const ResNetConfig& config, const BuildOptions& options) {
  auto model = std::make_shared<ResNet>(config, options.tensor_options);
  if (options.init_weights && !options.tensor_options.device().is_meta()) {
    torch::NoGradGuard no_grad;
    auto fc = model->child("fc");
    double bound = 1.0 / std::sqrt(static_cast<double>(fc->param("weight").size(1)));
    fc->param("weight").uniform_(-bound, bound);
    fc->param("bias").uniform_(-bound, bound);
    init_weights_vision(*model);
  }
  return model;
}

}  // namespace slapo
