// Pipeline schedules and the stage loop: activations forward, gradients back, one message each.
#include "distributed/pipeline.h"

#include <chrono>

#include "core/error.h"
#include "distributed/gradient_reductions.h"

namespace slapo::dist {

PipelineSchedule parse_pipeline_schedule(const std::string& name, const char* caller) {
  if (name == "gpipe") return PipelineSchedule::GPipe;
  if (name == "1f1b") return PipelineSchedule::OneFOneB;
  throw Error(fmt::format("{}: unknown pipeline schedule '{}' (choices: \"1f1b\", \"gpipe\")", caller, name));
}

const char* pipeline_schedule_name(PipelineSchedule s) { return s == PipelineSchedule::GPipe ? "gpipe" : "1f1b"; }

std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int stage, int stages, int micro_batches,
                                             int chunks) {
  std::vector<PipelineAction> out;
  if (chunks == 1) {
    int warmup = schedule == PipelineSchedule::GPipe ? micro_batches : std::min(stages - stage - 1, micro_batches);
    int forward = 0, backward = 0;
    for (; forward < warmup; ++forward) out.push_back({PipelineAction::Forward, forward});
    for (; forward < micro_batches; ++forward, ++backward) {
      out.push_back({PipelineAction::Forward, forward});
      out.push_back({PipelineAction::Backward, backward});
    }
    for (; backward < micro_batches; ++backward) out.push_back({PipelineAction::Backward, backward});
    return out;
  }
  if (schedule == PipelineSchedule::GPipe) {  // chunk by chunk forward, then back
    for (int c = 0; c < chunks; ++c)
      for (int mb = 0; mb < micro_batches; ++mb) out.push_back({PipelineAction::Forward, mb, c});
    for (int c = chunks - 1; c >= 0; --c)
      for (int mb = 0; mb < micro_batches; ++mb) out.push_back({PipelineAction::Backward, mb, c});
    return out;
  }
  // Interleaved 1F1B (Megatron): the k-th forward of this rank runs chunk (k mod p v) / p on
  // micro-batch (k / p v) p + k mod p; backwards visit the chunks in reverse.
  const int total = micro_batches * chunks, group = stages * chunks;
  auto step = [&](PipelineAction::Kind kind, int k) {
    int chunk = (k % group) / stages;
    if (kind == PipelineAction::Backward) chunk = chunks - 1 - chunk;
    return PipelineAction{kind, (k / group) * stages + k % stages, chunk};
  };
  int warmup = micro_batches == stages ? total : std::min(total, 2 * (stages - stage - 1) + (chunks - 1) * stages);
  int forward = 0, backward = 0;
  for (; forward < warmup; ++forward) out.push_back(step(PipelineAction::Forward, forward));
  for (; forward < total; ++forward, ++backward) {
    out.push_back(step(PipelineAction::Forward, forward));
    out.push_back(step(PipelineAction::Backward, backward));
  }
  for (; backward < total; ++backward) out.push_back(step(PipelineAction::Backward, backward));
  return out;
}

namespace {

// Message tags: each (micro-batch, sending virtual stage, direction) owns a block of parts.
constexpr int kPartsPerMessage = 1024;

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// What a stage keeps of a micro-batch between its forward and its backward.
struct InFlight {
  std::vector<at::Tensor> received;  // inputs from the previous stage (leaves of this stage's autograd graph)
  std::vector<at::Tensor> outputs;   // tensors sent on, or the loss on the last stage
};

}  // namespace

PipelineRunner::PipelineRunner(std::shared_ptr<Group> group, PipelineSchedule schedule, int chunks)
    : group_(std::move(group)), schedule_(schedule), chunks_(chunks), wire_(group_->device()) {
  if (!group_->contains_me()) throw Error(fmt::format("pipeline: this rank is not in {}", group_->describe()));
  if (chunks_ < 1) throw Error(fmt::format("pipeline: chunks per rank must be at least 1, got {}", chunks_));
  stage_ = group_->rank();
}

PipelineRunner::PipelineRunner(std::shared_ptr<Group> world, PipelineSchedule schedule, std::vector<StageMesh> meshes)
    : group_(std::move(world)), schedule_(schedule), chunks_(1), meshes_(std::move(meshes)), wire_(group_->device()) {
  int next = 0;
  stage_ = -1;
  for (size_t s = 0; s < meshes_.size(); ++s) {
    auto& m = meshes_[s];
    if (m.tp < 1 || m.dp < 1 || m.first_rank != next)
      throw Error(fmt::format("pipeline: stage {}'s mesh (tp {} x dp {} from rank {}) must take the next {} ranks from "
                              "rank {}", s, m.tp, m.dp, m.first_rank, m.size(), next));
    if (m.holds(group_->rank())) stage_ = static_cast<int>(s);
    next += m.size();
  }
  if (meshes_.size() < 2 || next != group_->size())
    throw Error(fmt::format("pipeline: {} stage meshes of {} ranks in all; they must cover the {} ranks of {}, two "
                            "stages or more", meshes_.size(), next, group_->size(), group_->describe()));
}

void PipelineRunner::send_tensor(const at::Tensor& t, int dst, int tag) {
  if (dst == group_->rank()) mailbox_[tag] = t.detach().clone();
  else group_->send(t, dst, tag, "pipeline");
}

at::Tensor PipelineRunner::recv_tensor(at::Tensor buffer, int src, int tag) {
  if (src != group_->rank()) {
    group_->recv(buffer, src, tag, "pipeline");
    return buffer;
  }
  auto found = mailbox_.find(tag);
  if (found == mailbox_.end()) throw Error(fmt::format("pipeline: internal: no message {} for this rank's own chunk", tag));
  auto t = std::move(found->second);
  mailbox_.erase(found);
  return t;
}

int PipelineRunner::tag(int micro_batch, int from, bool backward, int part) const {
  return ((micro_batch * stages() * chunks_ + from) * 2 + (backward ? 1 : 0)) * kPartsPerMessage + part;
}

std::vector<PipelineRunner::Peer> PipelineRunner::peers(int vs, bool backward, bool sending, int64_t local_rows) const {
  const bool toward_next = backward != sending;  // forward sends and backward receives face the next stage
  if (meshes_.empty()) {
    const int p = stages();
    return {Peer{toward_next ? (stage() + 1) % p : (stage() + p - 1) % p}};
  }
  const StageMesh& me = meshes_[vs];
  const StageMesh& other = meshes_[toward_next ? vs + 1 : vs - 1];
  const int dp_rank = me.dp_rank_of(group_->rank()), tp_rank = me.tp_rank_of(group_->rank());
  const int64_t rows = local_rows * me.dp;  // the micro-batch's
  if (rows % other.dp != 0)
    throw Error(fmt::format("pipeline: micro-batches of {} rows do not split among the {} data-parallel replicas of "
                            "stage {}; use micro-batches whose rows every stage's dp divides",
                            rows, other.dp, toward_next ? vs + 1 : vs - 1));
  // The data's receiver (dp rank x, tp rank u) takes it from its sender's tp rank u mod (sender's tp).
  auto rank_in = [](const StageMesh& m, int dp, int tp) { return m.first_rank + dp * m.tp + tp; };
  std::vector<Peer> out;
  for (int x = 0; x < other.dp; ++x) {
    int64_t first = std::max<int64_t>(x * (rows / other.dp), dp_rank * local_rows);
    int64_t last = std::min<int64_t>((x + 1) * (rows / other.dp), (dp_rank + 1) * local_rows);
    if (first >= last) continue;
    int64_t piece_first = other.dp == me.dp ? 0 : first - dp_rank * local_rows;
    int64_t piece_rows = other.dp == me.dp ? 0 : last - first;
    if (sending) {
      for (int u = tp_rank; u < other.tp; u += me.tp) out.push_back({rank_in(other, x, u), piece_first, piece_rows});
    } else {
      out.push_back({rank_in(other, x, tp_rank % other.tp), piece_first, piece_rows});
    }
  }
  return out;
}

// Header: n, then per tensor dtype, requires_grad, ndim, sizes. Sent as its length, then itself.
void PipelineRunner::send_piece(const std::vector<at::Tensor>& tensors, int dst, int micro_batch, int from,
                                bool backward) {
  if (tensors.size() + 2 >= kPartsPerMessage)
    throw Error(fmt::format("pipeline: stage {} sends {} tensors, at most {}", from, tensors.size(), kPartsPerMessage - 3));
  std::vector<int64_t> header{static_cast<int64_t>(tensors.size())};
  for (auto& t : tensors) {
    header.push_back(static_cast<int64_t>(t.scalar_type()));
    header.push_back(t.requires_grad());
    header.push_back(t.dim());
    for (auto d : t.sizes()) header.push_back(d);
  }
  auto header_t = torch::tensor(header, torch::kInt64).to(wire_);
  send_tensor(torch::tensor({static_cast<int64_t>(header.size())}, torch::kInt64).to(wire_), dst,
              tag(micro_batch, from, backward, 0));
  send_tensor(header_t, dst, tag(micro_batch, from, backward, 1));
  for (size_t i = 0; i < tensors.size(); ++i)
    send_tensor(tensors[i].contiguous(), dst, tag(micro_batch, from, backward, static_cast<int>(i) + 2));
}

std::vector<at::Tensor> PipelineRunner::recv_piece(int src, int micro_batch, int from, bool backward) {
  auto ints = torch::TensorOptions().dtype(torch::kInt64).device(wire_);
  auto length = recv_tensor(torch::zeros({1}, ints), src, tag(micro_batch, from, backward, 0));
  auto header_t = recv_tensor(torch::zeros({length.item<int64_t>()}, ints), src, tag(micro_batch, from, backward, 1)).cpu();
  const int64_t* h = header_t.data_ptr<int64_t>();
  int64_t n = *h++;
  std::vector<at::Tensor> out;
  for (int64_t i = 0; i < n; ++i) {
    auto dtype = static_cast<at::ScalarType>(*h++);
    bool requires_grad = *h++ != 0;
    int64_t ndim = *h++;
    std::vector<int64_t> sizes(h, h + ndim);
    h += ndim;
    auto t = recv_tensor(torch::empty(sizes, torch::TensorOptions().dtype(dtype).device(wire_)), src,
                         tag(micro_batch, from, backward, static_cast<int>(i) + 2));
    if (requires_grad) t.requires_grad_(true);
    out.push_back(t);
  }
  return out;
}

namespace {

// Rows [first, first + rows) of each tensor of `local_rows` rows (all of them when rows is 0).
std::vector<at::Tensor> rows_of(const std::vector<at::Tensor>& tensors, int64_t first, int64_t rows,
                                int64_t local_rows, int stage) {
  if (rows == 0) return tensors;
  std::vector<at::Tensor> out;
  for (auto& t : tensors) {
    if (t.dim() == 0 || t.size(0) != local_rows)
      throw Error(fmt::format("pipeline: stage {} passes on a tensor of shape [{}], which is not split by the "
                              "micro-batch's rows; stages of different data-parallel degrees exchange only such tensors",
                              stage, fmt::join(t.sizes(), ", ")));
    out.push_back(t.detach().narrow(0, first, rows));
  }
  return out;
}

// Each tensor's pieces, in order, joined along the rows.
std::vector<at::Tensor> join_rows(std::vector<std::vector<at::Tensor>> pieces) {
  if (pieces.size() == 1) return std::move(pieces[0]);
  std::vector<at::Tensor> out;
  for (size_t i = 0; i < pieces[0].size(); ++i) {
    std::vector<at::Tensor> parts;
    for (auto& p : pieces) parts.push_back(p.at(i).detach());
    auto joined = torch::cat(parts, 0);
    if (pieces[0][i].requires_grad()) joined.requires_grad_(true);
    out.push_back(joined);
  }
  return out;
}

}  // namespace

void PipelineRunner::send_activations(const std::vector<at::Tensor>& tensors, int micro_batch, int from,
                                      int64_t local_rows) {
  for (auto& peer : peers(from, false, true, local_rows)) {
    auto piece = rows_of(tensors, peer.first_row, peer.rows, local_rows, from);
    if (peer.rows)  // a slice is a new tensor: keep what the receiver is told about gradients
      for (size_t i = 0; i < piece.size(); ++i) piece[i].requires_grad_(tensors[i].requires_grad());
    send_piece(piece, peer.rank, micro_batch, from, false);
  }
}

std::vector<at::Tensor> PipelineRunner::recv_activations(int micro_batch, int from, int64_t local_rows) {
  std::vector<std::vector<at::Tensor>> pieces;
  for (auto& peer : peers(from + 1, false, false, local_rows))
    pieces.push_back(recv_piece(peer.rank, micro_batch, from, false));
  return join_rows(std::move(pieces));
}

namespace {

// Rows of a micro-batch on this rank: its first tensor input's (stage meshes only need them).
int64_t rows_of_inputs(const Values& inputs) {
  for (auto& v : inputs)
    if (v.isTensor() && v.toTensor().dim() > 0) return v.toTensor().size(0);
  return 0;
}

}  // namespace

double PipelineRunner::step(const StageFn& run_stage, const LossFn& loss_fn, const std::vector<Values>& inputs,
                            const std::vector<Value>& targets) {
  const int m = static_cast<int>(inputs.size());
  if (m == 0) throw Error("pipeline: step needs at least one micro-batch");
  if (chunks_ > 1 && schedule_ == PipelineSchedule::OneFOneB && m % stages() != 0)
    throw Error(fmt::format("pipeline: interleaved 1F1B needs a number of micro-batches divisible by the {} ranks, "
                            "got {}", stages(), m));
  const int virtual_stages = stages() * chunks_;
  // Each replica of the last stage takes the mean over its rows: its share of the batch's mean.
  const double loss_scale = 1.0 / m / (meshes_.empty() ? 1 : meshes_.back().dp);
  auto start = std::chrono::steady_clock::now();
  double busy = 0, loss_sum = 0;
  std::vector<InFlight> in_flight(static_cast<size_t>(m) * chunks_);

  for (auto& action : pipeline_actions(schedule_, stage(), stages(), m, chunks_)) {
    const int mb = action.micro_batch, vs = action.chunk * stages() + stage();
    const bool first = vs == 0, last = vs + 1 == virtual_stages;
    const int64_t rows = meshes_.empty() ? 0 : rows_of_inputs(inputs[mb]);
    auto& state = in_flight[static_cast<size_t>(mb) * chunks_ + action.chunk];
    if (action.kind == PipelineAction::Forward) {
      if (!first) state.received = recv_activations(mb, vs - 1, rows);
      auto t0 = std::chrono::steady_clock::now();
      auto outputs = run_stage(action.chunk, inputs[mb], state.received);
      if (last) {
        auto loss = loss_fn(outputs, mb < static_cast<int>(targets.size()) ? targets[mb] : Value()) * loss_scale;
        if (loss.numel() != 1)
          throw Error(fmt::format("pipeline: the loss must be a scalar, got shape [{}]", fmt::join(loss.sizes(), ", ")));
        loss_sum += loss.detach().item<double>();
        state.outputs = {loss};
        busy += seconds_since(t0);
      } else {
        busy += seconds_since(t0);
        send_activations(outputs, mb, vs, rows);
        state.outputs = std::move(outputs);
      }
    } else {
      std::vector<at::Tensor> roots, grads;
      if (last) {
        roots = state.outputs;
      } else {
        std::vector<std::vector<at::Tensor>> pieces;  // per sender, the gradient of each output that has one
        for (auto& peer : peers(vs, true, false, rows)) {
          pieces.emplace_back();
          for (size_t i = 0; i < state.outputs.size(); ++i) {
            auto& out = state.outputs[i];
            if (!out.requires_grad()) continue;
            auto sizes = out.sizes().vec();
            if (peer.rows) sizes[0] = peer.rows;
            pieces.back().push_back(recv_tensor(torch::empty(sizes, out.options().requires_grad(false)), peer.rank,
                                                tag(mb, vs, true, static_cast<int>(i))));
          }
        }
        grads = join_rows(std::move(pieces));
        for (auto& out : state.outputs)
          if (out.requires_grad()) roots.push_back(out);
      }
      auto t0 = std::chrono::steady_clock::now();
      if (!roots.empty()) run_backward([&] { torch::autograd::backward(roots, grads); });
      busy += seconds_since(t0);
      if (!first)
        for (auto& peer : peers(vs, true, true, rows))
          for (size_t i = 0; i < state.received.size(); ++i) {
            auto& in = state.received[i];
            if (!in.requires_grad()) continue;
            auto g = in.grad().defined() ? in.grad() : torch::zeros_like(in.detach());
            send_tensor(peer.rows ? g.narrow(0, peer.first_row, peer.rows).contiguous() : g, peer.rank,
                        tag(mb, vs - 1, true, static_cast<int>(i)));
          }
      state = InFlight{};
    }
  }
  if (stages() > 1) group_->wait_sends();
  mailbox_.clear();
  auto loss = torch::tensor({loss_sum}, torch::kFloat64);
  if (meshes_.empty()) {
    group_->broadcast(loss, stages() - 1, "pipeline");
  } else {  // the last stage's replicas each hold their share, once per replica (tp rank 0)
    const auto& tail = meshes_.back();
    if (!tail.holds(group_->rank()) || tail.tp_rank_of(group_->rank()) != 0) loss.zero_();
    group_->all_reduce(loss, "pipeline");
  }
  stats_ = {seconds_since(start), busy, m, stages(), chunks_};
  return loss.item<double>();
}

}  // namespace slapo::dist
