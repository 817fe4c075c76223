// ZeRO-1 AdamW over a flat view of the parameters, one per part.
#include "train/zero_adamw.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>

#include "core/error.h"
#include "distributed/group.h"
#include "train/adamw_update.h"

namespace slapo {

int ZeroAdamW::Shard::size() const { return part.group ? part.group->size() : 1; }
int ZeroAdamW::Shard::rank() const { return part.group ? part.group->rank() : 0; }

ZeroAdamW::ZeroAdamW(std::vector<ZeroPart> parts, ZeroOptions options) : options_(options) {
  for (auto& part : parts) {
    if (part.params.empty()) continue;
    Shard s;
    s.part = std::move(part);
    for (auto& p : s.part.params) s.total += p.numel();
    int n = s.size();
    s.padded = (s.total + n - 1) / n * n;  // every rank owns an equal slice
    s.numel = s.padded / n;
    auto options = s.part.params[0].options().requires_grad(false);
    s.exp_avg = torch::zeros({s.numel}, options);
    s.exp_avg_sq = torch::zeros({s.numel}, options);
    shards_.push_back(std::move(s));
  }
  if (shards_.empty()) throw Error("optim.zero_adamw: no parameters to optimize");
}

int64_t ZeroAdamW::shard_numel() const {
  int64_t n = 0;
  for (auto& s : shards_) n += s.numel;
  return n;
}

int64_t ZeroAdamW::total_numel() const {
  int64_t n = 0;
  for (auto& s : shards_) n += s.total;
  return n;
}

std::vector<std::pair<std::string, at::Tensor>> ZeroAdamW::state_tensors() const {
  std::vector<std::pair<std::string, at::Tensor>> out{{"zero.step", torch::tensor({step_}, torch::kInt64)}};
  for (auto& s : shards_) {
    out.emplace_back(s.part.state_prefix + "exp_avg", s.exp_avg);
    out.emplace_back(s.part.state_prefix + "exp_avg_sq", s.exp_avg_sq);
    out.emplace_back(s.part.state_prefix + "total_numel", torch::tensor({s.total}, torch::kInt64));
  }
  return out;
}

void ZeroAdamW::load_state_tensors(const std::vector<std::pair<std::string, at::Tensor>>& state) {
  std::map<std::string, at::Tensor> by_name(state.begin(), state.end());
  auto need = [&](const std::string& name) -> at::Tensor& {
    if (!by_name.count(name))
      throw Error(fmt::format("zero_adamw: the optimizer state has no '{}' (was it written by zero_adamw{}?)", name,
                              shards_.size() > 1 ? " over a model with the same experts spread" : ""));
    return by_name[name];
  };
  need("zero.step");
  for (auto& s : shards_)  // every name, then every size, before anything is written
    for (auto* key : {"exp_avg", "exp_avg_sq", "total_numel"}) need(s.part.state_prefix + key);
  for (auto& s : shards_) {
    const auto& pre = s.part.state_prefix;
    int64_t total = need(pre + "total_numel").item<int64_t>();
    int64_t avg = need(pre + "exp_avg").numel(), avg_sq = need(pre + "exp_avg_sq").numel();
    if (total != s.total || avg != s.numel || avg_sq != s.numel)
      throw Error(fmt::format("zero_adamw: the saved state covers {} parameters{} in slices of {}, this optimizer {} "
                              "in slices of {} (another model or another data-parallel group size)",
                              total, pre == "zero." ? "" : " (" + pre + "*)", avg, s.total, s.numel));
  }
  torch::NoGradGuard no_grad;
  for (auto& s : shards_) {
    s.exp_avg.copy_(by_name[s.part.state_prefix + "exp_avg"].reshape({-1}));
    s.exp_avg_sq.copy_(by_name[s.part.state_prefix + "exp_avg_sq"].reshape({-1}));
  }
  step_ = by_name["zero.step"].item<int64_t>();
}

void ZeroAdamW::zero_grad() {
  for (auto& s : shards_)
    for (auto& p : s.part.params) p.mutable_grad() = at::Tensor();
}

// Calls fn(parameter, offset in it, offset in the slice, count) for each piece of the
// parameters' concatenation that falls in [begin, begin + count).
template <typename Fn>
void for_each_piece(const std::vector<at::Tensor>& params, int64_t begin, int64_t count, Fn fn) {
  int64_t offset = 0;
  for (auto& p : params) {
    int64_t from = std::max(begin, offset), to = std::min(begin + count, offset + p.numel());
    if (from < to) fn(p, from - offset, from - begin, to - from);
    offset += p.numel();
  }
}

void ZeroAdamW::step() {
  torch::NoGradGuard no_grad;
  ++step_;
  for (auto& s : shards_) step_part(s);
}

void ZeroAdamW::step_part(Shard& s) {
  const auto& params = s.part.params;
  auto* group = s.part.group.get();
  const int64_t padded = s.padded, total = s.total, slice_numel = s.numel;
  at::Tensor &exp_avg = s.exp_avg, &exp_avg_sq = s.exp_avg_sq;
  // Whole-model copies cost what the update saves on a CPU: one flat gradient buffer, reduced in
  // place, and only this rank's slice of the parameters is gathered.
  auto options = params[0].options().requires_grad(false);
  const int64_t n_params = static_cast<int64_t>(params.size());
  // 1. this rank's slice of the gradient averaged over the group (reduce-scatter, as all-reduce +
  //    slice: Gloo has no reduce-scatter). Behind the padding, one flag per parameter counts the
  //    ranks that have its gradient, in the same all-reduce.
  at::Tensor flat = torch::empty({padded + n_params}, options);
  int64_t offset = 0;
  for (int64_t i = 0; i < n_params; ++i) {
    auto& p = params[i];
    auto into = flat.narrow(0, offset, p.numel());
    if (p.grad().defined()) into.copy_(p.grad().reshape({-1}));
    else into.zero_();
    flat[padded + i].fill_(p.grad().defined() ? 1 : 0);
    offset += p.numel();
  }
  flat.narrow(0, total, padded - total).zero_();
  if (group) group->all_reduce(flat, "zero_adamw");
  at::Tensor has_grad = flat.narrow(0, padded, n_params).gt(0).to(at::kCPU);
  const int64_t begin = s.rank() * slice_numel;
  at::Tensor grad = flat.narrow(0, begin, slice_numel);
  if (options_.average) grad.div_(s.size());
  at::Tensor param = torch::zeros({slice_numel}, options);
  // Parameters no rank has a gradient for keep their values and moments, as torch's AdamW skips
  // them (no weight decay either): their pieces of the slice are put back after the update.
  std::vector<std::pair<int64_t, int64_t>> untouched;  // (offset in the slice, count)
  auto flags = has_grad.accessor<bool, 1>();
  for_each_piece(params, begin, slice_numel, [&](const at::Tensor& p, int64_t from, int64_t at, int64_t n) {
    param.narrow(0, at, n).copy_(p.detach().reshape({-1}).narrow(0, from, n));
    if (!flags[&p - params.data()]) untouched.emplace_back(at, n);  // p is an element of params
  });
  std::vector<std::array<at::Tensor, 3>> kept;
  for (auto& [at, n] : untouched)
    kept.push_back({param.narrow(0, at, n).clone(), exp_avg.narrow(0, at, n).clone(), exp_avg_sq.narrow(0, at, n).clone()});
  // 2. torch::optim::AdamW's update on the slice, fused (train/adamw_update.h)
  AdamWHyper h{options_.lr, options_.beta1, options_.beta2, options_.eps, options_.weight_decay, step_};
  adamw_update({param}, {grad}, {exp_avg}, {exp_avg_sq}, h);
  for (size_t k = 0; k < untouched.size(); ++k) {
    auto [at, n] = untouched[k];
    param.narrow(0, at, n).copy_(kept[k][0]);
    exp_avg.narrow(0, at, n).copy_(kept[k][1]);
    exp_avg_sq.narrow(0, at, n).copy_(kept[k][2]);
  }
  // 3. every rank gets every slice back (all-gather), written straight into the parameters. On
  //    Gloo the all-gather is an all-reduce of the flat buffer holding only this rank's slice: Gloo's
  //    own allgather of GPT-2's two 250 MB slices took 0.5 to 3.7 s on 2 CPU ranks, this 0.3 s.
  std::vector<at::Tensor> slices;
  if (!group) {
    slices.push_back(param);
  } else if (param.is_cuda()) {
    flat = at::Tensor();
    slices = group->all_gather_slices(param, "zero_adamw");
  } else {
    flat = flat.narrow(0, 0, padded);
    flat.zero_();
    flat.narrow(0, begin, slice_numel).copy_(param);
    group->all_reduce(flat, "zero_adamw");
    for (int r = 0; r < s.size(); ++r) slices.push_back(flat.narrow(0, int64_t(r) * slice_numel, slice_numel));
  }
  for (size_t r = 0; r < slices.size(); ++r)
    for_each_piece(params, int64_t(r) * slice_numel, slice_numel,
                   [&](const at::Tensor& p, int64_t from, int64_t at, int64_t n) {
                     p.detach().view({-1}).narrow(0, from, n).copy_(slices[r].narrow(0, at, n));
                   });
}

}  // namespace slapo
