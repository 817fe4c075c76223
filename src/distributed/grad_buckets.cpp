// Gradient buckets: accumulator hooks count each parameter's gradients; a bucket whose
// parameters are all final is flattened and all-reduced asynchronously, in bucket order.
#include "distributed/grad_buckets.h"

#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/function_hook.h>
#include <torch/csrc/autograd/variable.h>

#include "core/error.h"

namespace slapo::dist {

struct GradBuckets::Bucket {
  std::vector<size_t> params;
  int ready = 0;
  at::Tensor flat;               // the flattened gradients, summed in place by the all-reduce; after
                                 // the first step the parameters' .grad are views into it
  std::function<void()> wait;    // set once started
};

struct GradBuckets::Hook : torch::autograd::FunctionPostHook {
  GradBuckets* owner;
  size_t param;
  Hook(GradBuckets* o, size_t p) : owner(o), param(p) {}
  torch::autograd::variable_list operator()(const torch::autograd::variable_list& outputs,
                                            const torch::autograd::variable_list&) override {
    owner->on_accumulated(param);
    return outputs;
  }
};

GradBuckets::GradBuckets(std::vector<std::pair<std::string, at::Tensor>> params, std::shared_ptr<Group> group,
                         int64_t bucket_bytes)
    : params_(std::move(params)), group_(std::move(group)) {
  if (bucket_bytes <= 0)
    throw Error(fmt::format("data_parallel: bucket_mb must be positive, got {:g}", static_cast<double>(bucket_bytes) / (1 << 20)));
  bucket_of_.resize(params_.size());
  accumulated_.assign(params_.size(), 0);
  int64_t filled = bucket_bytes;
  for (size_t i = params_.size(); i-- > 0;) {
    auto& p = params_[i].second;
    if (!p.requires_grad()) throw Error(fmt::format("data_parallel: parameter '{}' does not require grad", params_[i].first));
    int64_t bytes = p.numel() * static_cast<int64_t>(p.element_size());
    bool other_dtype = !buckets_.empty() && !buckets_.back()->params.empty() &&
                       params_[buckets_.back()->params.front()].second.scalar_type() != p.scalar_type();
    if ((filled + bytes > bucket_bytes && filled > 0) || other_dtype) {
      buckets_.push_back(std::make_unique<Bucket>());
      filled = 0;
    }
    buckets_.back()->params.push_back(i);
    bucket_of_[i] = buckets_.size() - 1;
    filled += bytes;
  }
  for (size_t i = 0; i < params_.size(); ++i) {
    auto accumulator = torch::autograd::impl::grad_accumulator(params_[i].second);
    auto key = accumulator->add_post_hook(std::make_unique<Hook>(this, i));
    hooks_.emplace_back(accumulator, key);
  }
}

GradBuckets::~GradBuckets() {
  for (auto& [accumulator, key] : hooks_) accumulator->del_post_hook(key);
  for (auto& b : buckets_)
    if (b->wait) b->wait();  // never leave a collective running on freed buffers
}

void GradBuckets::set_backward_passes(int n) {
  if (n < 1) throw Error(fmt::format("data_parallel: backward_passes must be at least 1, got {}", n));
  passes_ = n;
}

void GradBuckets::on_accumulated(size_t param) {
  if (finishing_) return;
  if (++accumulated_[param] != passes_) return;
  ++buckets_[bucket_of_[param]]->ready;
  start_ready_buckets(false);
}

void GradBuckets::start_ready_buckets(bool all) {
  for (; next_bucket_ < buckets_.size(); ++next_bucket_) {
    auto& b = *buckets_[next_bucket_];
    if (!all && b.ready < static_cast<int>(b.params.size())) return;
    if (!grads_are_views(b)) {  // first step, or an optimizer that set the gradients to None
      std::vector<at::Tensor> grads;
      for (auto i : b.params) {
        auto& p = params_[i].second;
        grads.push_back(p.grad().defined() ? p.grad().detach().reshape(-1) : torch::zeros({p.numel()}, p.options()));
      }
      b.flat = at::cat(grads);
    }
    b.wait = group_->all_reduce_async(b.flat, "data_parallel");
    if (!all) ++started_early_;
  }
}

bool GradBuckets::grads_are_views(const Bucket& b) const {
  if (!b.flat.defined()) return false;
  int64_t offset = 0;
  for (auto i : b.params) {
    auto& g = params_[i].second.grad();
    if (!g.defined() || !g.is_contiguous() ||
        g.data_ptr() != static_cast<char*>(b.flat.data_ptr()) + offset * b.flat.element_size())
      return false;
    offset += g.numel();
  }
  return true;
}

void GradBuckets::finish() {
  finishing_ = true;
  start_ready_buckets(true);
  torch::NoGradGuard no_grad;
  for (auto& b : buckets_) {
    b->wait();
    if (average_) b->flat.div_(group_->size());
    // The gradients become views of the bucket: backward accumulates into them in place, so
    // the next step reduces them without copying.
    if (!grads_are_views(*b)) {
      int64_t offset = 0;
      for (auto i : b->params) {
        auto& p = params_[i].second;
        p.mutable_grad() = b->flat.narrow(0, offset, p.numel()).view(p.sizes());
        offset += p.numel();
      }
    }
    b->wait = nullptr;
    b->ready = 0;
  }
  std::fill(accumulated_.begin(), accumulated_.end(), 0);
  next_bucket_ = 0;
  last_started_early_ = started_early_;
  started_early_ = 0;
  finishing_ = false;
}

std::vector<std::vector<std::string>> GradBuckets::bucket_names() const {
  std::vector<std::vector<std::string>> out;
  for (auto& b : buckets_) {
    out.emplace_back();
    for (auto i : b->params) out.back().push_back(params_[i].first);
  }
  return out;
}

}  // namespace slapo::dist
