// Weights of the same shape seen as one stacked tensor [E, ...] without a copy: the experts of a
// mixture of experts handed to one grouped matmul. Each weight stays its own parameter (its name,
// its gradient, its optimizer state); only where its values live changes.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace slapo {

/// Whether `weights` lie side by side in one storage, in order: the same shape, dtype and device,
/// contiguous, weight e at the first's offset + e x its size.
bool side_by_side(const std::vector<at::Tensor>& weights);

/// Moves the values of `weights` into one new storage, side by side, in place (set_data): the
/// tensors stay the ones the modules and optimizers hold. A copy of them, once.
void lay_side_by_side(const std::vector<at::Tensor>& weights);

/// [E, ...] over the storage of `weights` (side_by_side must hold), differentiable: the gradient
/// of the stacked tensor reaches each weight as its slice.
at::Tensor stacked_view(const std::vector<at::Tensor>& weights);

}  // namespace slapo
