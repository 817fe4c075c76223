// Weights laid side by side in one storage and seen as one stacked tensor (models/stacked_weights.h):
// what a mixture of experts' grouped matmul reads, without a copy of the experts each step.
#include <doctest/doctest.h>
#include <torch/torch.h>

#include "error_of.h"
#include "models/stacked_weights.h"

using namespace slapo;

TEST_CASE("stacked weights: laid side by side in place, seen as one tensor, each weight its own gradient") {
  torch::manual_seed(0);
  std::vector<at::Tensor> weights, values;
  for (int e = 0; e < 3; ++e) {
    weights.push_back(torch::randn({4, 5}).requires_grad_());
    values.push_back(weights.back().detach().clone());
  }
  auto* first = weights[0].unsafeGetTensorImpl();
  CHECK_FALSE(side_by_side(weights));
  CHECK(error_of([&] { stacked_view(weights); }).find("do not lie side by side") != std::string::npos);

  lay_side_by_side(weights);
  CHECK(side_by_side(weights));
  CHECK(weights[0].unsafeGetTensorImpl() == first);  // the same tensors, which modules and optimizers hold
  for (size_t e = 0; e < weights.size(); ++e) {
    CHECK(torch::equal(weights[e], values[e]));
    CHECK(weights[e].is_leaf());
    CHECK(weights[e].requires_grad());
  }

  auto view = stacked_view(weights);
  CHECK(torch::equal(view, torch::stack(values)));
  CHECK(view.data_ptr() == weights[0].data_ptr());  // no copy
  auto x = torch::randn({3, 2, 4}), dy = torch::randn({3, 2, 5});
  at::bmm(x, view).backward(dy);
  for (int64_t e = 0; e < 3; ++e) CHECK(torch::allclose(weights[e].grad(), x[e].t().matmul(dy[e])));

  // an optimizer's step in place is what the next view reads
  torch::optim::SGD sgd(weights, torch::optim::SGDOptions(0.1));
  sgd.step();
  CHECK(side_by_side(weights));
  CHECK(torch::equal(stacked_view(weights), torch::stack({weights[0].detach(), weights[1].detach(),
                                                          weights[2].detach()})));
  CHECK_FALSE(torch::equal(stacked_view(weights), torch::stack(values)));
}
