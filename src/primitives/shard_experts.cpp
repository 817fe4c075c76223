// shard_experts: expert parallelism. Each rank of the group keeps num_local_experts / |group| of a
// sparse MoE block's experts; every token travels to the ranks of its experts and back by
// all-to-all, and the router stays whole on every rank.
#include <fmt/format.h>

#include "core/error.h"
#include "distributed/autograd_collectives.h"
#include "distributed/world.h"
#include "models/moe.h"
#include "primitives/primitives.h"

namespace slapo {

namespace {

// The routed (token, slot) rows grouped by the rank holding their expert, sent there, run there,
// and sent back to be weighted and summed by their token, as GShard and Megatron's expert
// parallelism do (no capacity: every row travels).
class AllToAllDispatch : public ExpertDispatch {
 public:
  AllToAllDispatch(std::shared_ptr<dist::Group> group, int64_t experts)
      : group_(std::move(group)), per_rank_(experts / group_->size()) {}

  at::Tensor combine(const at::Tensor& tokens, const at::Tensor& selected, const at::Tensor& weights,
                     Module& experts, ExpertCompute mode) override {
    const int64_t ranks = group_->size(), k = selected.size(1);
    auto expert_of_slot = selected.reshape({-1});
    auto token_of_slot = at::arange(tokens.size(0), selected.options()).repeat_interleave(k);
    // rows in the order of the rank they go to (a stable sort keeps each token's order)
    auto destination = expert_of_slot.div(per_rank_, "floor");
    auto order = std::get<1>(destination.sort(/*stable=*/true, 0, false));
    auto counts = at::bincount(destination, {}, ranks).to(at::kLong);
    // how many rows each rank sends here: one count to each rank
    auto incoming = group_->all_to_all(counts.reshape({ranks, 1}), ones(ranks), ones(ranks), "shard_experts");
    auto send = to_vector(counts), recv = to_vector(incoming.reshape({-1}));
    auto token_sent = token_of_slot.index_select(0, order);
    auto rows = dist::all_to_all_rows(tokens.index_select(0, token_sent), send, recv, group_);
    auto expert_of_row =
        group_->all_to_all(expert_of_slot.index_select(0, order).reshape({-1, 1}), send, recv, "shard_experts")
            .reshape({-1});
    auto back = dist::all_to_all_rows(run_experts(rows, expert_of_row, experts, mode), recv, send, group_);
    auto weight_sent = weights.reshape({-1}).index_select(0, order).unsqueeze(-1);
    return at::zeros_like(tokens).index_add(0, token_sent, back * weight_sent);
  }

  std::string describe() const override {
    int64_t first = group_->rank() * per_rank_;
    return fmt::format("experts {} .. {} here, the others on {}", first, first + per_rank_ - 1, group_->describe());
  }

 private:
  static std::vector<int64_t> ones(int64_t n) { return std::vector<int64_t>(n, 1); }
  static std::vector<int64_t> to_vector(const at::Tensor& t) {
    auto c = t.to(at::kCPU).contiguous();
    return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
  }

  std::shared_ptr<dist::Group> group_;
  int64_t per_rank_;
};

}  // namespace

void shard_experts(Schedule& sch, const std::shared_ptr<dist::Group>& given, const CallSite& site) {
  Module& block = *sch.mod();
  if (!is_sparse_moe_block(block))
    throw Error(fmt::format("shard_experts: {} is a {}, not a sparse MoE block (MixtralSparseMoeBlock: a layer's "
                            "block_sparse_moe)",
                            sch.where(), block.type_name()));
  auto group = given ? given : sch.group();
  if (group->rank() < 0)
    throw Error(fmt::format("shard_experts: rank {} is not in {}, the group given for {}", dist::world()->rank(),
                            group->describe(), sch.where()));
  const int64_t experts = moe_expert_count(block), ranks = group->size();
  if (static_cast<int64_t>(block.child("experts")->children_in_order().size()) != experts)
    throw Error(fmt::format("shard_experts: {} already holds some of its {} experts only", sch.where(), experts));
  if (experts % ranks != 0)
    throw Error(fmt::format("shard_experts: {} has {} experts, which the {} ranks of {} do not divide (a group of a "
                            "size dividing {})",
                            sch.where(), experts, ranks, group->describe(), experts));
  const int64_t per_rank = experts / ranks, first = group->rank() * per_rank;
  keep_experts(block, first, per_rank);
  // Data parallelism averages gradients over the ranks; an expert here has summed every rank's
  // tokens' gradients through the all-to-all, so it takes that average itself
  for (auto& p : block.child("experts")->parameters())
    if (p.requires_grad()) p.register_hook([ranks](const at::Tensor& grad) { return grad / static_cast<double>(ranks); });
  set_expert_dispatch(block, std::make_shared<AllToAllDispatch>(group, experts));
  block.meta().expert_group = group->id();
  sch.refresh_children();
  sch.log().append({"shard_experts", sch.path(), site.lua_args, site.source});
}

}  // namespace slapo
