// aten::native_layer_norm on the meta device. LibTorch registers that kernel only from Python
// (torch/_meta_registrations.py); in C++ the op falls back to a batch-norm formula that has no
// meta kernel either, so a LayerNorm of meta tensors fails. The kernel is boxed: it reads the
// stack, so the same code serves int[] (LibTorch 1.13) and SymInt[] (2.x) normalized shapes.
#include "models/meta_kernels.h"

#include <ATen/ATen.h>
#include <torch/library.h>

#include <mutex>

namespace slapo {

namespace {

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd):
// out is shaped like input; mean and rstd keep the leading dimensions and 1 for each normalized one.
void native_layer_norm_meta(const c10::OperatorHandle&, torch::jit::Stack* stack) {
  auto args = torch::jit::last(*stack, 5);
  at::Tensor input = args[0].toTensor();
  int64_t normalized = int64_t(args[1].toListRef().size());
  torch::jit::drop(*stack, 5);
  std::vector<int64_t> stat_shape(input.sizes().begin(), input.sizes().end());
  for (int64_t i = input.dim() - normalized; i < input.dim(); ++i) stat_shape[i] = 1;
  torch::jit::push(*stack, at::empty_like(input), at::empty(stat_shape, input.options()),
                   at::empty(stat_shape, input.options()));
}

}  // namespace

void register_meta_kernels() {
  static std::once_flag once;
  std::call_once(once, [] {
    // lives as long as the process: the registration ends with the Library object
    static auto* library =
        new torch::Library(torch::Library::IMPL, "aten", c10::DispatchKey::Meta, __FILE__, __LINE__);
    library->impl("native_layer_norm", torch::CppFunction::makeFromBoxedFunction<&native_layer_norm_meta>());
  });
}

}  // namespace slapo
