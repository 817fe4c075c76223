// Convolutional layers (torchvision's building blocks).
#include "models/vision_layers.h"

#include <cmath>

#include "core/error.h"

namespace slapo {

namespace {
at::Tensor new_param(at::IntArrayRef shape, const at::TensorOptions& opts) {
  return torch::empty(shape, opts).requires_grad_(true);
}

// A [N, C, H, W] input, named in errors.
at::Tensor image_arg(const Values& args, const char* module) {
  auto x = tensor_arg(args, 0, module, "input");
  if (x.dim() != 4 && x.dim() != 3)
    throw Error(fmt::format("{}: expected a [N, C, H, W] (or [C, H, W]) input, got shape [{}]", module,
                            fmt::join(x.sizes(), ", ")));
  return x;
}

bool bias_after_sync(const Module& m) {
  auto w = m.meta().shards.find("weight");
  return w != m.meta().shards.end() && w->second.axis == 1 && m.has_param("bias") && !m.meta().shards.count("bias");
}
}  // namespace

// ---- Conv2d ----

Conv2d::Conv2d(int64_t in, int64_t out, const Options& o, const at::TensorOptions& opts)
    : ModuleBase("Conv2d"), options(o) {
  if (in % o.groups != 0 || out % o.groups != 0)
    throw Error(fmt::format("nn.Conv2d: in_channels {} and out_channels {} must both be divisible by groups {}", in,
                            out, o.groups));
  set_param("weight", new_param({out, in / o.groups, o.kernel[0], o.kernel[1]}, opts));
  if (o.bias) set_param("bias", new_param({out}, opts));
}

void Conv2d::reset_parameters() {
  torch::NoGradGuard no_grad;
  auto w = param("weight");
  double fan_in = static_cast<double>(w.size(1) * w.size(2) * w.size(3));
  double bound = 1.0 / std::sqrt(fan_in);  // kaiming_uniform(a = sqrt(5)) is uniform(+-1/sqrt(fan_in))
  w.uniform_(-bound, bound);
  if (has_param("bias")) param("bias").uniform_(-bound, bound);
}

std::string Conv2d::describe() const {
  auto w = param("weight");
  std::string text = fmt::format("{}, {}, kernel_size=({}, {}), stride=({}, {})", w.size(1) * options.groups, w.size(0),
                                 options.kernel[0], options.kernel[1], options.stride[0], options.stride[1]);
  if (options.padding != std::array<int64_t, 2>{0, 0})
    text += fmt::format(", padding=({}, {})", options.padding[0], options.padding[1]);
  if (options.dilation != std::array<int64_t, 2>{1, 1})
    text += fmt::format(", dilation=({}, {})", options.dilation[0], options.dilation[1]);
  if (options.groups != 1) text += fmt::format(", groups={}", options.groups);
  if (!has_param("bias")) text += ", bias=False";
  return text;
}

Value Conv2d::forward(Values args) {
  auto x = image_arg(args, "Conv2d");
  auto bias = has_param("bias") && !bias_after_sync(*this) ? param("bias") : at::Tensor();
  return at::conv2d(x, param("weight"), bias, options.stride, options.padding, options.dilation, options.groups);
}

Value Conv2d::finish(Value out) {
  if (bias_after_sync(*this) && out.isTensor()) return out.toTensor() + param("bias").view({-1, 1, 1});
  return out;
}

// ---- BatchNorm2d ----

BatchNorm2d::BatchNorm2d(int64_t n, double eps_, double momentum_, const at::TensorOptions& opts)
    : ModuleBase("BatchNorm2d"), eps(eps_), momentum(momentum_) {
  torch::NoGradGuard no_grad;
  set_param("weight", new_param({n}, opts));
  set_param("bias", new_param({n}, opts));
  if (!opts.device().is_meta()) {
    param("weight").fill_(1.0);
    param("bias").zero_();
  }
  // On the meta device the statistics still get values (a few numbers per channel): no
  // initialiser would know them later, and build only initialises parameters.
  auto stats = opts.device().is_meta() ? opts.device(at::kCPU) : opts;
  register_buffer("running_mean", torch::zeros({n}, stats));
  register_buffer("running_var", torch::ones({n}, stats));
  register_buffer("num_batches_tracked", torch::zeros({}, stats.dtype(at::kLong)));
}

std::string BatchNorm2d::describe() const {
  return fmt::format("{}, eps={:g}, momentum={:g}", param("weight").size(0), eps, momentum);
}

Value BatchNorm2d::forward(Values args) {
  auto x = image_arg(args, "BatchNorm2d");
  auto buffers = named_buffers(/*recurse=*/false);
  auto mean = *buffers.find("running_mean"), var = *buffers.find("running_var");
  if (is_training()) {
    torch::NoGradGuard no_grad;
    buffers.find("num_batches_tracked")->add_(1);
  }
  return at::batch_norm(x, param("weight"), param("bias"), mean, var, is_training(), momentum, eps,
                        /*cudnn_enabled=*/true);
}

// ---- pooling ----

MaxPool2d::MaxPool2d(std::array<int64_t, 2> k, std::array<int64_t, 2> s, std::array<int64_t, 2> p)
    : ModuleBase("MaxPool2d"), kernel(k), stride(s), padding(p) {}

std::string MaxPool2d::describe() const {
  return fmt::format("kernel_size={}, stride={}, padding={}", kernel[0], stride[0], padding[0]);
}

Value MaxPool2d::forward(Values args) { return at::max_pool2d(image_arg(args, "MaxPool2d"), kernel, stride, padding); }

AdaptiveAvgPool2d::AdaptiveAvgPool2d(std::array<int64_t, 2> out) : ModuleBase("AdaptiveAvgPool2d"), output_size(out) {}

std::string AdaptiveAvgPool2d::describe() const {
  return fmt::format("output_size=({}, {})", output_size[0], output_size[1]);
}

Value AdaptiveAvgPool2d::forward(Values args) {
  return at::adaptive_avg_pool2d(image_arg(args, "AdaptiveAvgPool2d"), output_size);
}

}  // namespace slapo
