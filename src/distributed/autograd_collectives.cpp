// Differentiable collectives as autograd Functions; each saves its group's id and dim.
#include "distributed/autograd_collectives.h"

#include "distributed/world.h"

namespace slapo::dist {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::shared_ptr<Group> saved_group(AutogradContext* ctx) {
  return group_by_id(static_cast<int>(ctx->saved_data["group"].toInt()));
}

struct CopyToGroup : public torch::autograd::Function<CopyToGroup> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t group) {
    ctx->saved_data["group"] = group;
    return x.view_as(x);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    at::Tensor g = grads[0].clone();
    saved_group(ctx)->all_reduce(g, "sync(bwd)");
    return {g, at::Tensor()};
  }
};

struct ReduceFromGroup : public torch::autograd::Function<ReduceFromGroup> {
  static at::Tensor forward(AutogradContext*, const at::Tensor& x, int64_t group) {
    at::Tensor y = x.clone();
    group_by_id(static_cast<int>(group))->all_reduce(y, "sync(all_reduce)");
    return y;
  }
  static variable_list backward(AutogradContext*, variable_list grads) { return {grads[0], at::Tensor()}; }
};

// Backward keeps this rank's slice of the gradient; with `sum_grads` (Megatron's sequence-parallel
// gather, whose users, column-parallel projections, each hold a partial sum of the gradient) it
// reduce-scatters the gradient instead.
struct GatherFromGroup : public torch::autograd::Function<GatherFromGroup> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t dim, int64_t group, bool sum_grads) {
    ctx->saved_data["group"] = group;
    ctx->saved_data["dim"] = dim;
    ctx->saved_data["sum_grads"] = sum_grads;
    return group_by_id(static_cast<int>(group))->all_gather(x, dim, "sync(all_gather)");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    int64_t dim = ctx->saved_data["dim"].toInt();
    auto g = ctx->saved_data["sum_grads"].toBool()
                 ? saved_group(ctx)->reduce_scatter(grads[0].contiguous(), dim, "sync(all_gather backward)")
                 : saved_group(ctx)->local_slice(grads[0], dim, "sync(all_gather backward)").contiguous();
    return {g, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct ScatterToGroup : public torch::autograd::Function<ScatterToGroup> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t dim, int64_t group) {
    ctx->saved_data["group"] = group;
    ctx->saved_data["dim"] = dim;
    return group_by_id(static_cast<int>(group))->local_slice(x, dim, "sync(scatter)").contiguous();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {saved_group(ctx)->all_gather(grads[0], ctx->saved_data["dim"].toInt(), "sync(scatter backward)"),
            at::Tensor(), at::Tensor()};
  }
};

struct ReduceScatterToGroup : public torch::autograd::Function<ReduceScatterToGroup> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, int64_t dim, int64_t group) {
    ctx->saved_data["group"] = group;
    ctx->saved_data["dim"] = dim;
    return group_by_id(static_cast<int>(group))->reduce_scatter(x, dim, "sync(reduce_scatter)");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    return {saved_group(ctx)->all_gather(grads[0], ctx->saved_data["dim"].toInt(), "sync(reduce_scatter backward)"),
            at::Tensor(), at::Tensor()};
  }
};

struct AllToAllRows : public torch::autograd::Function<AllToAllRows> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, std::vector<int64_t> send,
                            std::vector<int64_t> recv, int64_t group) {
    ctx->saved_data["group"] = group;
    ctx->saved_data["send"] = send;
    ctx->saved_data["recv"] = recv;
    return group_by_id(static_cast<int>(group))->all_to_all(x, send, recv, "all_to_all");
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto send = ctx->saved_data["send"].toIntVector(), recv = ctx->saved_data["recv"].toIntVector();
    return {saved_group(ctx)->all_to_all(grads[0].contiguous(), recv, send, "all_to_all backward"), at::Tensor(),
            at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor all_to_all_rows(const at::Tensor& x, const std::vector<int64_t>& send_rows,
                           const std::vector<int64_t>& recv_rows, const std::shared_ptr<Group>& g) {
  return AllToAllRows::apply(x, send_rows, recv_rows, g->id());
}
at::Tensor copy_to_group(const at::Tensor& x, const std::shared_ptr<Group>& g) { return CopyToGroup::apply(x, g->id()); }
at::Tensor reduce_from_group(const at::Tensor& x, const std::shared_ptr<Group>& g) {
  return ReduceFromGroup::apply(x, g->id());
}
at::Tensor gather_from_group(const at::Tensor& x, int64_t dim, const std::shared_ptr<Group>& g) {
  return GatherFromGroup::apply(x, dim, g->id(), false);
}
at::Tensor gather_sequence_from_group(const at::Tensor& x, int64_t dim, const std::shared_ptr<Group>& g) {
  return GatherFromGroup::apply(x, dim, g->id(), true);
}
at::Tensor scatter_to_group(const at::Tensor& x, int64_t dim, const std::shared_ptr<Group>& g) {
  return ScatterToGroup::apply(x, dim, g->id());
}
at::Tensor reduce_scatter_to_group(const at::Tensor& x, int64_t dim, const std::shared_ptr<Group>& g) {
  return ReduceScatterToGroup::apply(x, dim, g->id());
}

}  // namespace slapo::dist
