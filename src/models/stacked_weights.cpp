#include "models/stacked_weights.h"

#include "core/error.h"

namespace slapo {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The stacked view as one autograd step: forward looks at the storage the weights share, backward
// hands each weight its slice of the stacked gradient.
struct StackedView : public torch::autograd::Function<StackedView> {
  static at::Tensor forward(AutogradContext*, at::TensorList weights) {  // a list: each weight an input
    const at::Tensor& first = weights.front();
    std::vector<int64_t> sizes{static_cast<int64_t>(weights.size())}, strides{first.numel()};
    for (int64_t d = 0; d < first.dim(); ++d) sizes.push_back(first.size(d)), strides.push_back(first.stride(d));
    return first.detach().as_strided(sizes, strides, first.storage_offset());
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return grads[0].unbind(0); }
};

}  // namespace

bool side_by_side(const std::vector<at::Tensor>& weights) {
  if (weights.empty()) return false;
  const at::Tensor& first = weights.front();
  for (size_t e = 0; e < weights.size(); ++e) {
    const at::Tensor& w = weights[e];
    if (!w.defined() || !w.is_contiguous() || w.sizes() != first.sizes() || w.scalar_type() != first.scalar_type() ||
        w.device() != first.device() || !w.storage().is_alias_of(first.storage()) ||
        w.storage_offset() != first.storage_offset() + static_cast<int64_t>(e) * first.numel())
      return false;
  }
  return true;
}

void lay_side_by_side(const std::vector<at::Tensor>& weights) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> values;
  for (auto& w : weights) values.push_back(w.detach());
  auto stacked = at::stack(values);
  for (size_t e = 0; e < weights.size(); ++e) {
    at::Tensor w = weights[e];  // the same tensor: set_data changes where it lives for every holder
    w.set_data(stacked[static_cast<int64_t>(e)]);
  }
}

at::Tensor stacked_view(const std::vector<at::Tensor>& weights) {
  if (!side_by_side(weights))
    throw Error(fmt::format("stacked_view: the {} weights do not lie side by side in one storage (lay_side_by_side "
                            "puts them there)", weights.size()));
  return StackedView::apply(at::TensorList(weights));
}

}  // namespace slapo
