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

std::vector<PipelineAction> pipeline_actions(PipelineSchedule schedule, int stage, int stages, int micro_batches) {
  std::vector<PipelineAction> out;
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

namespace {

// Message tags: each micro-batch owns a block; forward and backward messages are apart.
constexpr int kTagsPerMicroBatch = 4096;
constexpr int kBackwardTags = 2048;
int forward_tag(int micro_batch, int part) { return micro_batch * kTagsPerMicroBatch + part; }
int backward_tag(int micro_batch, int part) { return micro_batch * kTagsPerMicroBatch + kBackwardTags + part; }

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

// What a stage keeps of a micro-batch between its forward and its backward.
struct InFlight {
  std::vector<at::Tensor> received;  // inputs from the previous stage (leaves of this stage's autograd graph)
  std::vector<at::Tensor> outputs;   // tensors sent on, or the loss on the last stage
};

}  // namespace

PipelineRunner::PipelineRunner(std::shared_ptr<Group> group, PipelineSchedule schedule)
    : group_(std::move(group)), schedule_(schedule) {
  if (!group_->contains_me()) throw Error(fmt::format("pipeline: this rank is not in {}", group_->describe()));
}

// Header: n, then per tensor dtype, requires_grad, ndim, sizes. Sent as its length, then itself.
void PipelineRunner::send_activations(const std::vector<at::Tensor>& tensors, int micro_batch) {
  if (tensors.size() + 2 >= kBackwardTags)
    throw Error(fmt::format("pipeline: stage {} sends {} tensors, at most {}", stage(), tensors.size(), kBackwardTags - 3));
  std::vector<int64_t> header{static_cast<int64_t>(tensors.size())};
  for (auto& t : tensors) {
    header.push_back(static_cast<int64_t>(t.scalar_type()));
    header.push_back(t.requires_grad());
    header.push_back(t.dim());
    for (auto d : t.sizes()) header.push_back(d);
  }
  auto header_t = torch::tensor(header, torch::kInt64);
  group_->send(torch::tensor({static_cast<int64_t>(header.size())}, torch::kInt64), stage() + 1, forward_tag(micro_batch, 0), "pipeline");
  group_->send(header_t, stage() + 1, forward_tag(micro_batch, 1), "pipeline");
  for (size_t i = 0; i < tensors.size(); ++i)
    group_->send(tensors[i], stage() + 1, forward_tag(micro_batch, static_cast<int>(i) + 2), "pipeline");
}

std::vector<at::Tensor> PipelineRunner::recv_activations(int micro_batch) {
  auto length = torch::zeros({1}, torch::kInt64);
  group_->recv(length, stage() - 1, forward_tag(micro_batch, 0), "pipeline");
  auto header_t = torch::zeros({length.item<int64_t>()}, torch::kInt64);
  group_->recv(header_t, stage() - 1, forward_tag(micro_batch, 1), "pipeline");
  const int64_t* h = header_t.data_ptr<int64_t>();
  int64_t n = *h++;
  std::vector<at::Tensor> out;
  for (int64_t i = 0; i < n; ++i) {
    auto dtype = static_cast<at::ScalarType>(*h++);
    bool requires_grad = *h++ != 0;
    int64_t ndim = *h++;
    std::vector<int64_t> sizes(h, h + ndim);
    h += ndim;
    auto t = torch::empty(sizes, torch::TensorOptions().dtype(dtype));
    group_->recv(t, stage() - 1, forward_tag(micro_batch, static_cast<int>(i) + 2), "pipeline");
    if (requires_grad) t.requires_grad_(true);
    out.push_back(t);
  }
  return out;
}

double PipelineRunner::step(const StageFn& run_stage, const LossFn& loss_fn, const std::vector<Values>& inputs,
                            const std::vector<Value>& targets) {
  const int m = static_cast<int>(inputs.size());
  if (m == 0) throw Error("pipeline: step needs at least one micro-batch");
  const bool first = stage() == 0, last = stage() + 1 == stages();
  auto start = std::chrono::steady_clock::now();
  double busy = 0, loss_sum = 0;
  std::vector<InFlight> in_flight(m);

  for (auto& action : pipeline_actions(schedule_, stage(), stages(), m)) {
    int mb = action.micro_batch;
    auto& state = in_flight[mb];
    if (action.kind == PipelineAction::Forward) {
      if (!first) state.received = recv_activations(mb);
      auto t0 = std::chrono::steady_clock::now();
      auto outputs = run_stage(inputs[mb], state.received);
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
        send_activations(outputs, mb);
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
          auto g = torch::empty(out.sizes(), out.options().requires_grad(false));
          group_->recv(g, stage() + 1, backward_tag(mb, static_cast<int>(i)), "pipeline");
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
          group_->send(in.grad().defined() ? in.grad() : torch::zeros_like(in.detach()), stage() - 1,
                       backward_tag(mb, static_cast<int>(i)), "pipeline");
        }
      state = InFlight{};
    }
  }
  group_->wait_sends();
  auto loss = torch::tensor({loss_sum}, torch::kFloat64);
  group_->broadcast(loss, stages() - 1, "pipeline");
  stats_ = {seconds_since(start), busy, m, stages()};
  return loss.item<double>();
}

}  // namespace slapo::dist
