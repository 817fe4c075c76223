// context_parallel: the sequence split over a group's ranks, each keeping its tokens (with causal
// load balance, chunks i and 2N-1-i of 2N, as torchtitan does), attention by ring attention over
// the group or by Ulysses' all-to-all over heads, and the loss of the whole sequence on every rank.
#include <fmt/format.h>

#include "core/error.h"
#include "distributed/ring_attention.h"
#include "distributed/ulysses_attention.h"
#include "distributed/world.h"
#include "models/sequence_split.h"
#include "primitives/primitives.h"

namespace slapo {

namespace {

// How attention sees every rank's keys: passed around the ring, or all tokens of 1/N of the heads
// on each rank (all_to_all).
enum class Method { kRing, kAllToAll };

class GroupSplit : public SequenceSplit {
 public:
  GroupSplit(std::shared_ptr<dist::Group> group, Method method, bool load_balance, int64_t score_bytes)
      : group_(std::move(group)), method_(method), load_balance_(load_balance), score_bytes_(score_bytes) {}

  int ranks() const override { return group_->size(); }
  int group_id() const override { return group_->id(); }

  at::Tensor local_indices(int64_t seq, const at::Device& device, const char* who) const override {
    return indices_of(group_->rank(), seq, device, who);
  }

  at::Tensor attend(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale, int64_t window,
                    const at::Tensor& documents) const override {
    const int64_t seq = q.size(2) * ranks();
    std::vector<at::Tensor> every;
    for (int r = 0; r < ranks(); ++r) every.push_back(indices_of(r, seq, at::kCPU, "context_parallel"));  // read on the host
    if (method_ == Method::kRing)
      return dist::ring_attention(q, k, v, at::stack(every), group_, scale, score_bytes_, window, documents);
    return dist::ulysses_attention(q, k, v, at::stack(every), group_, scale, score_bytes_, window, "context_parallel",
                                   documents);
  }

  void check_heads(int64_t heads, const std::string& where) const override {
    if (method_ == Method::kAllToAll && heads % ranks() != 0)
      throw Error(fmt::format("context_parallel: method \"all_to_all\" splits attention's heads over the {} ranks of {}; "
                              "{} has {} heads, which do not divide (a group of a size dividing {}, or method = \"ring\")",
                              ranks(), group_->describe(), where, heads, heads));
  }

  at::Tensor mean_loss(const at::Tensor& local_sum, const at::Tensor& local_count) const override {
    auto totals = at::stack({local_sum.detach().to(at::kDouble), local_count.to(at::kDouble)});
    group_->all_reduce(totals, "context_parallel(loss)");
    auto count = totals[1].clamp_min(1.0);
    auto part = local_sum * (static_cast<double>(ranks()) / count).to(local_sum.scalar_type());
    return part + ((totals[0] / count).to(part.scalar_type()) - part).detach();
  }

  std::string describe() const override {
    return fmt::format("{} over {}{}", method_ == Method::kRing ? "ring attention" : "all-to-all attention (Ulysses)",
                       group_->describe(), load_balance_ ? ", load-balanced chunks" : "");
  }

 private:
  // Rank r's tokens: chunk r of N, or chunks r and 2N-1-r of 2N (each rank an equal share of the
  // causal mask's work).
  at::Tensor indices_of(int r, int64_t seq, const at::Device& device, const char* who) const {
    const int64_t n = ranks(), chunks = load_balance_ ? 2 * n : n;
    if (seq % chunks != 0)
      throw Error(fmt::format("{}: context_parallel over {} ranks cuts a sequence into {} chunks{}; {} tokens do not "
                              "divide (a sequence of a multiple of {})",
                              who, n, chunks, load_balance_ ? " (two a rank, for causal load balance)" : "", seq, chunks));
    const int64_t chunk = seq / chunks;
    auto opts = at::TensorOptions().dtype(at::kLong).device(device);
    if (!load_balance_) return at::arange(r * chunk, (r + 1) * chunk, opts);
    return at::cat({at::arange(r * chunk, (r + 1) * chunk, opts),
                    at::arange((chunks - 1 - r) * chunk, (chunks - r) * chunk, opts)});
  }

  std::shared_ptr<dist::Group> group_;
  Method method_;
  bool load_balance_;
  int64_t score_bytes_;
};

}  // namespace

void context_parallel(Schedule& sch, const ContextParallelOptions& options, const CallSite& site) {
  if (sch.parent())
    throw Error(fmt::format("context_parallel: {} is not the model's root; apply it to the root schedule (sch), which "
                            "takes the whole rows and splits their tokens", sch.where()));
  if (options.method != "ring" && options.method != "all_to_all")
    throw Error(fmt::format("context_parallel: method '{}' is not one ({}; choices: ring, all_to_all)", options.method,
                            sch.where()));
  const Method method = options.method == "ring" ? Method::kRing : Method::kAllToAll;
  auto group = options.group ? options.group : dist::world();
  if (group->rank() < 0)
    throw Error(fmt::format("context_parallel: rank {} is not in {}, the group given for {}", dist::world()->rank(),
                            group->describe(), sch.where()));
  if (sequence_split_of(*sch.mod()))
    throw Error(fmt::format("context_parallel: {} already splits its sequence ({})", sch.where(),
                            sequence_split_of(*sch.mod())->describe()));
  if (!(options.score_mib > 0))
    throw Error(fmt::format("context_parallel: score_mib must be a positive number of MiB, got {} ({})",
                            options.score_mib, sch.where()));
  const auto score_bytes = static_cast<int64_t>(options.score_mib * double(1 << 20));
  set_sequence_split(*sch.mod(), std::make_shared<GroupSplit>(group, method, options.load_balance, score_bytes), sch.where());
  sch.log().append({"context_parallel", sch.path(), site.lua_args, site.source});
}

}  // namespace slapo
