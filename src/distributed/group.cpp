// Collectives of a group: c10d calls on contiguous tensors on the backend's device, with
// emulated reduce_scatter.
#include "distributed/group.h"

#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <atomic>
#include <chrono>
#include <iterator>
#include <thread>

#include "core/error.h"
#include "core/mapped_memory.h"

namespace slapo::dist {

struct Group::PendingSends {
  std::vector<std::pair<c10::intrusive_ptr<c10d::Work>, bool>> works;  // each with whether Gloo runs it
};

Group::Group(int id, int rank, std::vector<int> global_ranks, c10::intrusive_ptr<CollectiveBackend> cpu,
             c10::intrusive_ptr<CollectiveBackend> cuda, at::Device device)
    : id_(id), rank_(rank), ranks_(std::move(global_ranks)), cpu_(std::move(cpu)), cuda_(std::move(cuda)),
      device_(device), pending_(std::make_shared<PendingSends>()) {}

void Group::shutdown() {
#if TORCH_VERSION_MAJOR >= 2
  if (cuda_) cuda_->shutdown();  // NCCL's orderly end; its destructor would abort the communicators
#endif
  cuda_.reset();
  cpu_.reset();
}

// CUDA tensors go to NCCL and CPU tensors to Gloo where the group has both; a tensor whose kind of
// backend is missing goes to the other, staged through its device.
Group::Route Group::route(const at::Tensor& t) const {
  if (cuda_ && (t.is_cuda() || !cpu_)) return {cuda_.get(), device_};
  return {cpu_.get(), at::Device(at::kCPU), true};
}

std::string Group::describe() const {
  return id_ == 0 ? fmt::format("the world ({} rank{})", size(), size() == 1 ? "" : "s")
                  : fmt::format("group {} (ranks {})", id_, fmt::join(ranks_, ", "));
}

// A group without a backend has one rank, and its collectives are the identity. One-rank groups
// get a backend only when NCCL is asked for by name, so that a single GPU runs NCCL's own path.

void Group::check_member(const char* caller) const {
  if (!contains_me())
    throw Error(fmt::format("dist.{}: this rank is not in {}", caller, describe()));
}

namespace {
int64_t wrap_dim(const at::Tensor& t, int64_t dim, const char* caller) {
  int64_t n = t.dim();
  if (dim < -n || dim >= n)
    throw Error(fmt::format("dist.{}: dim {} is out of range for a {}-d tensor (valid: {} .. {})", caller, dim, n, -n,
                            n - 1));
  return dim < 0 ? dim + n : dim;
}

// t as the backend takes it: contiguous, on its device, float32 for bfloat16 where it must be;
// t's own memory when it already is.
at::Tensor on_wire(const at::Tensor& t, at::Device device, bool widen_bf16) {
  auto d = t.detach();
  if (widen_bf16 && d.scalar_type() == at::kBFloat16) return d.to(device, at::kFloat).contiguous();
  return d.is_contiguous() && d.device() == device ? d : d.to(device).contiguous();
}
bool same_memory(const at::Tensor& a, const at::Tensor& b) {
  return a.device() == b.device() && a.data_ptr() == b.data_ptr();
}

// Waits for a collective, then (on Gloo) for the backend's worker thread to let go of it. Gloo's
// worker drops its references just after marking a work done; were it the last owner of the
// tensors the work holds, they would be freed on that thread, where LibTorch's memory reporting
// (slapo.peak_tensor_mib, held_tensor_mib: thread-local) never hears of it, and every such buffer
// would look held forever. `work` must be this thread's one reference. NCCL's works (its watchdog
// keeps them) are not waited for.
// Should the worker not let go within a second (a LibTorch whose Gloo keeps its works), it stops
// being waited for. The bound is time, not a count of yields: with more ranks than cores the worker
// may wait its turn for milliseconds.
ExchangeTotals& exchange_totals() {
  static ExchangeTotals totals;
  return totals;
}

void finish(const c10::intrusive_ptr<c10d::Work>& work, bool gloo) {
  static std::atomic<bool> worker_lets_go{true};
  work->wait();
  if (!gloo || !worker_lets_go.load(std::memory_order_relaxed)) return;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  for (int spins = 0; work.use_count() > 1; ++spins) {
    if (spins < 1000) {
      std::this_thread::yield();
      continue;
    }
    if (std::chrono::steady_clock::now() > give_up) {
      worker_lets_go = false;
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
}
}  // namespace

at::Tensor& Group::all_reduce(at::Tensor& t, const char* caller) {
  check_member(caller);
  auto to = route(t);
  if (!to.backend) return t;
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> bufs{on_wire(t, to.device, to.widen_bf16)};
  finish(to.backend->allreduce(bufs), to.device.is_cpu());
  if (!same_memory(bufs[0], t)) t.detach().copy_(bufs[0]);
  return t;
}

std::function<void()> Group::all_reduce_async(at::Tensor t, const char* caller) {
  check_member(caller);
  if (!t.is_contiguous()) throw Error(fmt::format("dist.{}: the tensor must be contiguous", caller));
  auto to = route(t);
  if (!to.backend) return [] {};
  std::vector<at::Tensor> bufs{on_wire(t, to.device, to.widen_bf16)};  // staged when its backend is missing
  auto work = to.backend->allreduce(bufs);
  const bool gloo = to.device.is_cpu();
  if (!same_memory(bufs[0], t))
    return [work, staged = bufs[0], t, gloo]() mutable {
      finish(work, gloo);
      torch::NoGradGuard no_grad;
      t.detach().copy_(staged);
    };
  return [work, gloo] { finish(work, gloo); };
}

at::Tensor Group::all_gather(const at::Tensor& t, int64_t dim, const char* caller) {
  dim = wrap_dim(t, dim, caller);
  return at::cat(all_gather_slices(t, caller), dim);
}

std::vector<at::Tensor> Group::all_gather_slices(const at::Tensor& t, const char* caller) {
  check_member(caller);
  auto to = route(t);
  if (!to.backend) return {t.detach().clone()};
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> input{on_wire(t, to.device, to.widen_bf16)};
  std::vector<std::vector<at::Tensor>> outputs(1);
  for (int i = 0; i < size(); ++i) outputs[0].push_back(torch::empty_like(input[0]));
  finish(to.backend->allgather(outputs, input), to.device.is_cpu());
  for (auto& slice : outputs[0]) slice = slice.to(t.device(), t.scalar_type());
  return outputs[0];
}

namespace {
// A call's signature as numbers every rank can gather: collective, dtype, rank of the tensor, its
// sizes (up to kMaxDims; a longer shape adds its element count) and the collective's argument.
constexpr int kMaxDims = 8;
const char* const kCollectives[] = {"all_reduce", "all_gather", "reduce_scatter", "broadcast", "barrier"};

at::Tensor call_signature(const char* caller, const at::Tensor& t, int64_t arg) {
  std::vector<int64_t> sig(kMaxDims + 5, -1);
  sig[0] = 0;
  for (int64_t i = 0; i < int64_t(std::size(kCollectives)); ++i)
    if (std::string(caller) == kCollectives[i]) sig[0] = i + 1;
  sig[1] = t.defined() ? static_cast<int64_t>(t.scalar_type()) : -1;
  sig[2] = t.defined() ? t.dim() : -1;
  for (int64_t d = 0; t.defined() && d < std::min<int64_t>(t.dim(), kMaxDims); ++d) sig[3 + d] = t.size(d);
  sig[3 + kMaxDims] = t.defined() ? t.numel() : -1;
  sig[4 + kMaxDims] = arg;
  return torch::tensor(sig, torch::kInt64);
}

std::string describe_signature(const at::Tensor& sig) {
  auto s = sig.accessor<int64_t, 1>();
  std::string what = s[0] > 0 ? kCollectives[s[0] - 1] : "another collective";
  if (s[1] < 0) return what;
  std::vector<int64_t> sizes;
  for (int64_t d = 0; d < std::min<int64_t>(s[2], kMaxDims); ++d) sizes.push_back(s[3 + d]);
  return fmt::format("{} of a {} [{}] tensor{}", what, c10::toString(static_cast<at::ScalarType>(s[1])),
                     fmt::join(sizes, ", "), s[4 + kMaxDims] ? fmt::format(" ({})", s[4 + kMaxDims]) : "");
}
}  // namespace

void Group::check_same_call(const char* caller, const at::Tensor& t, int64_t arg) {
  check_member(caller);
  if (size() == 1) return;
  at::Tensor mine = call_signature(caller, t, arg);
  auto all = all_gather_slices(mine, caller);
  bool same = true;
  for (auto& other : all) same = same && other.equal(all[0]);
  if (same) return;
  std::vector<std::string> calls;
  for (size_t r = 0; r < all.size(); ++r) calls.push_back(fmt::format("rank {}: {}", r, describe_signature(all[r])));
  throw Error(fmt::format("dist.{}: the ranks of {} made different calls ({}); every rank must call the same "
                          "collectives in the same order on tensors of the same shape. A loop over pairs() visits "
                          "keys in another order on each rank: loop over sorted keys",
                          caller, describe(), fmt::join(calls, "; ")));
}

at::Tensor& Group::all_gather_into(at::Tensor& out, const at::Tensor& t, const char* caller) {
  all_gather_into_async(out, t, caller)();
  return out;
}

std::function<void()> Group::all_gather_into_async(at::Tensor out, const at::Tensor& t, const char* caller) {
  check_member(caller);
  if (!out.is_contiguous() || out.dim() != t.dim() || out.size(0) != t.size(0) * size())
    throw Error(fmt::format("dist.{}: the output must be a contiguous [{} x {}, ...] tensor, got [{}]", caller, size(),
                            t.size(0), fmt::join(out.sizes(), ", ")));
  auto to = route(t);
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> parts;
  for (int r = 0; r < size(); ++r) parts.push_back(out.narrow(0, r * t.size(0), t.size(0)));
  bool in_place = to.backend && out.device() == to.device && out.scalar_type() == t.scalar_type() &&
                  !(to.widen_bf16 && t.scalar_type() == at::kBFloat16);
  if (!in_place) {  // one rank, or staged through another device or dtype
    auto slices = all_gather_slices(t, caller);
    for (int r = 0; r < size(); ++r) parts[r].copy_(slices[r]);
    return [] {};
  }
  at::Tensor wire = on_wire(t, to.device, false);
  const bool gloo = to.device.is_cpu();
  // Gloo gathers into a flat buffer of its own, copied into the parts when done: of a large tensor,
  // the same rows of every rank's part at a time (its worker threads run a few chunks at once)
  const int64_t rows = t.size(0), row_bytes = rows ? static_cast<int64_t>(t.nbytes()) / rows : 1;
  const int64_t chunk_rows = gloo && static_cast<int64_t>(out.nbytes()) > kGlooChunkBytes
                                 ? std::max<int64_t>(1, kGlooChunkBytes / (size() * row_bytes))
                                 : std::max<int64_t>(rows, 1);
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  for (int64_t at = 0; at < rows || works.empty(); at += chunk_rows) {
    const int64_t len = std::min(chunk_rows, rows - at);
    std::vector<at::Tensor> input{wire.narrow(0, at, len)};
    std::vector<std::vector<at::Tensor>> outputs(1);
    for (auto& part : parts) outputs[0].push_back(part.narrow(0, at, len));
    works.push_back(to.backend->allgather(outputs, input));
  }
  return [works, wire, out, gloo] {
    for (auto& work : works) finish(work, gloo);
  };
}

at::Tensor Group::all_to_all(const at::Tensor& t, const std::vector<int64_t>& send_rows,
                             const std::vector<int64_t>& recv_rows, const char* caller) {
  check_member(caller);
  if (int64_t(send_rows.size()) != size() || int64_t(recv_rows.size()) != size())
    throw Error(fmt::format("dist.{}: {} send and {} receive counts for the {} ranks of {}", caller, send_rows.size(),
                            recv_rows.size(), size(), describe()));
  int64_t sent = 0, received = 0;
  for (int r = 0; r < size(); ++r) sent += send_rows[r], received += recv_rows[r];
  if (t.dim() < 1 || sent != t.size(0))
    throw Error(fmt::format("dist.{}: the send counts add up to {} rows, the tensor has {}", caller, sent,
                            t.dim() < 1 ? 0 : t.size(0)));
  auto to = route(t);
  if (!to.backend) return t.detach().clone();
  const auto start = std::chrono::steady_clock::now();
  torch::NoGradGuard no_grad;
  at::Tensor input = on_wire(t, to.device, to.widen_bf16);
  auto shape = input.sizes().vec();
  shape[0] = received;
  at::Tensor output = at::empty(shape, input.options());
  std::vector<int64_t> out_splits = recv_rows, in_splits = send_rows;
  finish(to.backend->alltoall_base(output, input, out_splits, in_splits), to.device.is_cpu());
  at::Tensor result = output.to(t.device(), t.scalar_type());
  auto& totals = exchange_totals();
  totals.calls += 1;
  totals.bytes += static_cast<int64_t>(input.nbytes());
  totals.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

ExchangeTotals all_to_all_totals() { return exchange_totals(); }

at::Tensor& Group::broadcast(at::Tensor& t, int src, const char* caller) {
  check_member(caller);
  if (src < 0 || src >= size())
    throw Error(fmt::format("dist.{}: source rank {} is not in {} (valid: 0 .. {})", caller, src, describe(), size() - 1));
  auto to = route(t);
  if (!to.backend) return t;
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> bufs{on_wire(t, to.device, to.widen_bf16)};
  c10d::BroadcastOptions opts;
  opts.rootRank = src;
  finish(to.backend->broadcast(bufs, opts), to.device.is_cpu());
  if (!same_memory(bufs[0], t)) t.detach().copy_(bufs[0]);
  return t;
}

at::Tensor Group::local_slice(const at::Tensor& t, int64_t dim, const char* caller) const {
  check_member(caller);
  dim = wrap_dim(t, dim, caller);
  if (t.size(dim) % size() != 0)
    throw Error(fmt::format("dist.{}: size {} of dim {} is not divisible by the {} ranks of {}", caller, t.size(dim), dim,
                            size(), describe()));
  int64_t part = t.size(dim) / size();
  return t.narrow(dim, rank_ * part, part);
}

at::Tensor Group::reduce_scatter(const at::Tensor& t, int64_t dim, const char* caller) {
  at::Tensor sum = t.detach().clone();
  all_reduce(sum, caller);
  return local_slice(sum, dim, caller).contiguous();
}

// Gloo's reduce-scatter is an all-reduce and a slice. Of a large tensor, each chunk all-reduced holds
// one piece of every rank's part (the same rows of each), and this rank keeps its own: the step
// holds its part and one chunk, never a whole copy of t.
at::Tensor Group::reduce_scatter_in_chunks(const at::Tensor& t, const char* caller) {
  torch::NoGradGuard no_grad;
  const int n = size();
  const int64_t rows = t.size(0) / n, row_bytes = static_cast<int64_t>(t.nbytes()) / t.size(0);
  const int64_t chunk_rows = std::max<int64_t>(1, kGlooChunkBytes / (n * row_bytes));
  auto part_sizes = t.sizes().vec();
  part_sizes[0] = rows;
  at::Tensor part = empty_mapped(part_sizes, t.options().requires_grad(false));
  auto chunk_sizes = part_sizes;
  chunk_sizes.insert(chunk_sizes.begin(), n);
  chunk_sizes[1] = std::min(chunk_rows, rows);
  const at::Tensor buffer = empty_mapped(chunk_sizes, part.options());  // one, narrowed for the last chunk
  for (int64_t at = 0; at < rows; at += chunk_rows) {
    const int64_t len = std::min(chunk_rows, rows - at);
    at::Tensor chunk = len == chunk_sizes[1] ? buffer : buffer.narrow(1, 0, len).contiguous();
    for (int r = 0; r < n; ++r) chunk[r].copy_(t.narrow(0, r * rows + at, len));
    all_reduce(chunk, caller);
    part.narrow(0, at, len).copy_(chunk[rank_]);
  }
  return part;
}

std::function<at::Tensor()> Group::reduce_scatter_async(const at::Tensor& t, const char* caller) {
  check_member(caller);
  if (t.dim() == 0 || t.size(0) % size() != 0)
    throw Error(fmt::format("dist.{}: [{}] does not split into {} equal parts along dim 0", caller,
                            fmt::join(t.sizes(), ", "), size()));
  const int64_t rows = t.size(0) / size(), first = rows * rank_;
  auto to = route(t);
  if (to.backend && to.device.is_cpu() && static_cast<int64_t>(t.nbytes()) > kGlooChunkBytes)
    return [part = reduce_scatter_in_chunks(t, caller)]() { return part; };
  // both on their own mappings on the CPU: whole gradients come and go a unit at a time
  at::Tensor sum = empty_mapped(t.sizes(), t.options().requires_grad(false));
  sum.copy_(t.detach());
  auto wait = all_reduce_async(sum, caller);
  return [wait, sum, rows, first]() mutable {
    wait();
    at::Tensor mine = sum.narrow(0, first, rows);
    at::Tensor part = empty_mapped(mine.sizes(), mine.options());
    part.copy_(mine);
    // the whole sum goes now (with the work that holds it), not when the caller drops this wait
    wait = nullptr;
    sum = at::Tensor();
    return part;
  };
}

void Group::send(const at::Tensor& t, int dst, int tag, const char* caller) {
  check_member(caller);
  if (dst < 0 || dst >= size() || dst == rank_)
    throw Error(fmt::format("dist.{}: destination rank {} is not another rank of {} (valid: 0 .. {}, not {})", caller,
                            dst, describe(), size() - 1, rank_));
  std::vector<at::Tensor> bufs{t.detach().contiguous()};  // the work holds the buffer until sent
  auto to = route(t);
  if (bufs[0].device() != to.device) bufs[0] = bufs[0].to(to.device);
  pending_->works.emplace_back(to.backend->send(bufs, dst, tag), to.device.is_cpu());
}

void Group::recv(at::Tensor& t, int src, int tag, const char* caller) {
  check_member(caller);
  if (src < 0 || src >= size() || src == rank_)
    throw Error(fmt::format("dist.{}: source rank {} is not another rank of {} (valid: 0 .. {}, not {})", caller, src,
                            describe(), size() - 1, rank_));
  if (!t.is_contiguous()) throw Error(fmt::format("dist.{}: the receive buffer must be contiguous", caller));
  std::vector<at::Tensor> bufs{t};
  auto to = route(t);
  if (t.device() != to.device)
    throw Error(fmt::format("dist.{}: the receive buffer is on {}, but this group receives on {}", caller,
                            t.device().str(), to.device.str()));
  finish(to.backend->recv(bufs, src, tag), to.device.is_cpu());
}

void Group::wait_sends() {
  auto works = std::move(pending_->works);
  pending_->works.clear();
  for (auto& [work, gloo] : works) finish(work, gloo);
}

void Group::barrier() {
  check_member("barrier");
  auto* backend = cpu_ ? cpu_.get() : cuda_.get();
  if (!backend) return;
  backend->barrier()->wait();
}

}  // namespace slapo::dist
