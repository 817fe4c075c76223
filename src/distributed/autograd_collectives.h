// Collectives that autograd sees (Megatron's f and g and their siblings). A plain c10d
// collective is in place and invisible to autograd; these are torch::autograd::Functions whose
// backward runs the matching collective on the gradient.
#pragma once

#include <memory>

#include "distributed/group.h"

namespace slapo::dist {

/// f: identity forward, all-reduce of the gradient backward (enters a column-parallel region).
at::Tensor copy_to_group(const at::Tensor& x, const std::shared_ptr<Group>& g);
/// g: all-reduce forward, identity backward (leaves a row-parallel region).
at::Tensor reduce_from_group(const at::Tensor& x, const std::shared_ptr<Group>& g);
/// all-gather along dim forward; this rank's slice of the gradient backward.
at::Tensor gather_from_group(const at::Tensor& x, int64_t dim, const std::shared_ptr<Group>& g);
/// all-gather along dim forward; reduce-scatter of the gradient backward: its users (column-parallel
/// projections in Megatron's sequence parallelism) each hold a partial sum of it.
at::Tensor gather_sequence_from_group(const at::Tensor& x, int64_t dim, const std::shared_ptr<Group>& g);
/// this rank's slice along dim forward; all-gather of the gradient backward.
at::Tensor scatter_to_group(const at::Tensor& x, int64_t dim, const std::shared_ptr<Group>& g);
/// all-to-all of rows forward (send_rows[r] rows of x to rank r, recv_rows[r] from it); the same
/// exchange reversed on the gradient backward (expert parallelism's dispatch and combine).
at::Tensor all_to_all_rows(const at::Tensor& x, const std::vector<int64_t>& send_rows,
                           const std::vector<int64_t>& recv_rows, const std::shared_ptr<Group>& g);
/// reduce-scatter along dim forward; all-gather of the gradient backward.
at::Tensor reduce_scatter_to_group(const at::Tensor& x, int64_t dim, const std::shared_ptr<Group>& g);

}  // namespace slapo::dist
