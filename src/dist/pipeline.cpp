// Pipeline schedules and the stage loop: activations forward, gradients back, one message each.
#include "dist/pipeline.h"

#include <chrono>

#include "core/error.h"

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
}

void PipelineRunner::send_tensor(const at::Tensor& t, int dst, int tag) {
  if (dst == stage()) mailbox_[tag] = t.detach().clone();
  else group_->send(t, dst, tag, "pipeline");
}

at::Tensor PipelineRunner::recv_tensor(at::Tensor buffer, int src, int tag) {
  if (src != stage()) {
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

// Header: n, then per tensor dtype, requires_grad, ndim, sizes. Sent as its length, then itself.
void PipelineRunner::send_activations(const std::vector<at::Tensor>& tensors, int micro_batch, int from) {
  if (tensors.size() + 2 >= kPartsPerMessage)
    throw Error(fmt::format("pipeline: stage {} sends {} tensors, at most {}", from, tensors.size(), kPartsPerMessage - 3));
  const int next = (stage() + 1) % stages();
  std::vector<int64_t> header{static_cast<int64_t>(tensors.size())};
  for (auto& t : tensors) {
    header.push_back(static_cast<int64_t>(t.scalar_type()));
    header.push_back(t.requires_grad());
    header.push_back(t.dim());
    for (auto d : t.sizes()) header.push_back(d);
  }
  auto header_t = torch::tensor(header, torch::kInt64).to(wire_);
  send_tensor(torch::tensor({static_cast<int64_t>(header.size())}, torch::kInt64).to(wire_), next,
              tag(micro_batch, from, false, 0));
  send_tensor(header_t, next, tag(micro_batch, from, false, 1));
  for (size_t i = 0; i < tensors.size(); ++i)
    send_tensor(tensors[i], next, tag(micro_batch, from, false, static_cast<int>(i) + 2));
}

std::vector<at::Tensor> PipelineRunner::recv_activations(int micro_batch, int from) {
  const int prev = (stage() + stages() - 1) % stages();
  auto ints = torch::TensorOptions().dtype(torch::kInt64).device(wire_);
  auto length = recv_tensor(torch::zeros({1}, ints), prev, tag(micro_batch, from, false, 0));
  auto header_t = recv_tensor(torch::zeros({length.item<int64_t>()}, ints), prev, tag(micro_batch, from, false, 1)).cpu();
  const int64_t* h = header_t.data_ptr<int64_t>();
  int64_t n = *h++;
  std::vector<at::Tensor> out;
  for (int64_t i = 0; i < n; ++i) {
    auto dtype = static_cast<at::ScalarType>(*h++);
    bool requires_grad = *h++ != 0;
    int64_t ndim = *h++;
    std::vector<int64_t> sizes(h, h + ndim);
    h += ndim;
    auto t = recv_tensor(torch::empty(sizes, torch::TensorOptions().dtype(dtype).device(wire_)), prev,
                         tag(micro_batch, from, false, static_cast<int>(i) + 2));
    if (requires_grad) t.requires_grad_(true);
    out.push_back(t);
  }
  return out;
}

double PipelineRunner::step(const StageFn& run_stage, const LossFn& loss_fn, const std::vector<Values>& inputs,
                            const std::vector<Value>& targets) {
  const int m = static_cast<int>(inputs.size());
  if (m == 0) throw Error("pipeline: step needs at least one micro-batch");
  if (chunks_ > 1 && schedule_ == PipelineSchedule::OneFOneB && m % stages() != 0)
    throw Error(fmt::format("pipeline: interleaved 1F1B needs a number of micro-batches divisible by the {} ranks, "
                            "got {}", stages(), m));
  const int virtual_stages = stages() * chunks_;
  const int prev = (stage() + stages() - 1) % stages(), next = (stage() + 1) % stages();
  auto start = std::chrono::steady_clock::now();
  double busy = 0, loss_sum = 0;
  std::vector<InFlight> in_flight(static_cast<size_t>(m) * chunks_);

  for (auto& action : pipeline_actions(schedule_, stage(), stages(), m, chunks_)) {
    const int mb = action.micro_batch, vs = action.chunk * stages() + stage();
    const bool first = vs == 0, last = vs + 1 == virtual_stages;
    auto& state = in_flight[static_cast<size_t>(mb) * chunks_ + action.chunk];
    if (action.kind == PipelineAction::Forward) {
      if (!first) state.received = recv_activations(mb, vs - 1);
      auto t0 = std::chrono::steady_clock::now();
      auto outputs = run_stage(action.chunk, inputs[mb], state.received);
      if (last) {
        if (outputs.size() != 1)
          throw Error(fmt::format("pipeline: the last stage returned {} tensors; the loss needs one output", outputs.size()));
        auto loss = loss_fn(outputs[0], mb < static_cast<int>(targets.size()) ? targets[mb] : Value()) / m;
        if (loss.numel() != 1)
          throw Error(fmt::format("pipeline: the loss must be a scalar, got shape [{}]", fmt::join(loss.sizes(), ", ")));
        loss_sum += loss.detach().item<double>();
        state.outputs = {loss};
        busy += seconds_since(t0);
      } else {
        busy += seconds_since(t0);
        send_activations(outputs, mb, vs);
        state.outputs = std::move(outputs);
      }
    } else {
      std::vector<at::Tensor> roots, grads;
      if (last) {
        roots = state.outputs;
      } else {
        for (size_t i = 0; i < state.outputs.size(); ++i) {
          auto& out = state.outputs[i];
          if (!out.requires_grad()) continue;
          auto g = recv_tensor(torch::empty(out.sizes(), out.options().requires_grad(false)), next,
                               tag(mb, vs, true, static_cast<int>(i)));
          roots.push_back(out);
          grads.push_back(g);
        }
      }
      auto t0 = std::chrono::steady_clock::now();
      if (!roots.empty()) torch::autograd::backward(roots, grads);
      busy += seconds_since(t0);
      if (!first)
        for (size_t i = 0; i < state.received.size(); ++i) {
          auto& in = state.received[i];
          if (!in.requires_grad()) continue;
          send_tensor(in.grad().defined() ? in.grad() : torch::zeros_like(in.detach()), prev,
                      tag(mb, vs - 1, true, static_cast<int>(i)));
        }
      state = InFlight{};
    }
  }
  if (stages() > 1) group_->wait_sends();
  mailbox_.clear();
  auto loss = torch::tensor({loss_sum}, torch::kFloat64);
  group_->broadcast(loss, stages() - 1, "pipeline");
  stats_ = {seconds_since(start), busy, m, stages(), chunks_};
  return loss.item<double>();
}

}  // namespace slapo::dist
