// ZeRO-1 AdamW over the parameters' concatenation, one per part, stepped in chunks in place.
#include "train/zero_adamw.h"

#include <algorithm>
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
    torch::NoGradGuard no_grad;
    for (auto& p : s.part.params) {
      if (!p.is_contiguous()) p.set_data(p.contiguous());  // the step updates its pieces in place, by offset
      s.total += p.numel();
    }
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
  const int64_t n_params = static_cast<int64_t>(params.size()), slice_numel = s.numel;
  const int n = s.size(), me = s.rank();
  auto options = params[0].options().requires_grad(false);
  // 1. Which parameters some rank has a gradient for: torch's AdamW skips the others (no weight
  //    decay, moments unchanged). One with a gradient elsewhere gets zeros here.
  at::Tensor flags = torch::zeros({n_params}, options.dtype(at::kFloat));
  for (int64_t i = 0; i < n_params; ++i)
    if (params[i].grad().defined()) flags[i].fill_(1);
  if (group) group->all_reduce(flags, "zero_adamw");
  at::Tensor has_grad = flags.gt(0).to(at::kCPU);
  auto has = has_grad.accessor<bool, 1>();
  for (int64_t i = 0; i < n_params; ++i) {
    auto p = params[i];  // a handle to the same parameter: its .grad is the model's
    if (!has[i]) continue;
    if (!p.grad().defined()) p.mutable_grad() = at::zeros_like(p);
    else if (!p.grad().is_contiguous()) p.mutable_grad() = p.grad().contiguous();
  }
  auto index = [&](const at::Tensor& p) { return &p - params.data(); };  // p is an element of params
  // 2. The gradients over each chunk of every rank's slice (the same offsets in each), summed over
  //    the group by reduce-scatter; this rank's part lands in its own gradients, in place (averaged).
  const int64_t chunk = std::max<int64_t>(1, options_.chunk_bytes / (int64_t(n) * params[0].element_size()));
  at::Tensor buffer = torch::empty({n, std::min(chunk, slice_numel)}, options);
  for (int64_t at = 0; at < slice_numel; at += chunk) {
    const int64_t len = std::min(chunk, slice_numel - at);
    at::Tensor rows = buffer.narrow(1, 0, len).contiguous();  // the whole buffer but for the last chunk
    rows.zero_();
    for (int r = 0; r < n; ++r)
      for_each_piece(params, int64_t(r) * slice_numel + at, len, [&](const at::Tensor& p, int64_t from, int64_t to, int64_t k) {
        if (has[index(p)]) rows[r].narrow(0, to, k).copy_(p.grad().view({-1}).narrow(0, from, k));
      });
    at::Tensor mine = group ? group->reduce_scatter_async(rows, "zero_adamw")().view({-1}) : rows[0];
    if (options_.average && n > 1) mine.div_(n);
    for_each_piece(params, int64_t(me) * slice_numel + at, len, [&](const at::Tensor& p, int64_t from, int64_t to, int64_t k) {
      if (has[index(p)]) p.grad().view({-1}).narrow(0, from, k).copy_(mine.narrow(0, to, k));
    });
  }
  // 3. torch::optim::AdamW's update (fused, train/adamw_update.h) on the pieces of the parameters
  //    in this rank's slice, in place: the slice is never copied out.
  std::vector<at::Tensor> ps, gs, ms, vs;
  for_each_piece(params, int64_t(me) * slice_numel, slice_numel, [&](const at::Tensor& p, int64_t from, int64_t to, int64_t k) {
    if (!has[index(p)]) return;
    ps.push_back(p.detach().view({-1}).narrow(0, from, k));
    gs.push_back(p.grad().view({-1}).narrow(0, from, k));
    ms.push_back(s.exp_avg.narrow(0, to, k));
    vs.push_back(s.exp_avg_sq.narrow(0, to, k));
  });
  AdamWHyper h{options_.lr, options_.beta1, options_.beta2, options_.eps, options_.weight_decay, step_};
  if (!ps.empty()) adamw_update(ps, gs, ms, vs, h);
  if (!group) return;
  // 4. Every rank's slice back to every rank, chunk by chunk, written straight into the parameters.
  //    On a CPU the all-gather is an all-reduce of the chunk holding only this rank's row: Gloo's
  //    own allgather of GPT-2's two 250 MB slices took 0.5 to 3.7 s on 2 CPU ranks, this 0.3 s.
  for (int64_t at = 0; at < slice_numel; at += chunk) {
    const int64_t len = std::min(chunk, slice_numel - at);
    at::Tensor rows = buffer.narrow(1, 0, len).contiguous();
    const bool on_cpu = rows.is_cpu();
    if (on_cpu) rows.zero_();
    at::Tensor own = rows[me];
    for_each_piece(params, int64_t(me) * slice_numel + at, len, [&](const at::Tensor& p, int64_t from, int64_t to, int64_t k) {
      own.narrow(0, to, k).copy_(p.detach().view({-1}).narrow(0, from, k));
    });
    if (on_cpu) {
      group->all_reduce(rows, "zero_adamw");
    } else {
      at::Tensor mine = own.unsqueeze(0).clone();
      group->all_gather_into(rows, mine, "zero_adamw");
    }
    for (int r = 0; r < n; ++r) {
      if (r == me) continue;
      for_each_piece(params, int64_t(r) * slice_numel + at, len, [&](const at::Tensor& p, int64_t from, int64_t to, int64_t k) {
        p.detach().view({-1}).narrow(0, from, k).copy_(rows[r].narrow(0, to, k));
      });
    }
  }
}

}  // namespace slapo
