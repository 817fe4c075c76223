// The device profiler: matmuls, attention and a transformer layer timed forward + backward with
// LibTorch on this machine, written as devices/*.json rows.
#include "plan/profile_device.h"

#include <unistd.h>

#include <chrono>
#include <functional>

#include <torch/torch.h>

#include "core/error.h"
#include "plan/profile_cuda.h"

namespace slapo::plan {

double time_of(const std::function<void()>& fn, double budget, bool cuda) {
  auto sync = [cuda] {
    if (cuda) torch::cuda::synchronize();
  };
  fn();
  sync();
  // a GPU's calls queued a few at a time: one wait per call would time the launch and the wait
  const int group = cuda ? 4 : 1;
  auto start = std::chrono::steady_clock::now();
  int reps = 0;
  double elapsed = 0;
  do {
    for (int i = 0; i < group; ++i) fn();
    sync();
    reps += group;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (elapsed < budget);
  return elapsed / reps;
}

namespace {

double total_memory_bytes(const ProfileOptions& o) {
  if (o.device == "cpu")
    return static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  return 80.0 * (1ull << 30);  // the H100's, as h100.json: a CUDA build asks the device (profile_cuda)
}

// The CPU's rows: float32 matmuls, attention on the math path, nn::TransformerEncoderLayer, copy.
void profile_cpu(nlohmann::json& out, bool quick) {
  auto opts = torch::TensorOptions().device(torch::kCPU);
  const double budget = quick ? 0.02 : 0.25;
  // matmul: tokens x in @ in x out at transformer widths
  std::vector<std::array<int64_t, 3>> shapes = quick
      ? std::vector<std::array<int64_t, 3>>{{256, 256, 256}, {512, 512, 1024}}
      : std::vector<std::array<int64_t, 3>>{{512, 512, 512},    {1024, 1024, 1024}, {1024, 1024, 4096},
                                            {1024, 4096, 1024}, {2048, 2048, 2048}, {2048, 1024, 8192}};
  out["matmul"] = nlohmann::json::array();
  for (auto [m, k, n] : shapes) {
    auto a = torch::randn({m, k}, opts), b = torch::randn({k, n}, opts);
    double s = time_of([&] { (void)at::matmul(a, b); }, budget);
    out["matmul"].push_back({{"dtype", "float32"}, {"m", m}, {"k", k}, {"n", n}, {"s", s},
                             {"tflops", 2.0 * double(m) * double(k) * double(n) / s / 1e12}});
  }

  // attention: causal softmax(q k^T / sqrt(d)) v, forward + backward (the math path every build has)
  out["attention"] = nlohmann::json::array();
  for (auto [seq, heads, head_dim] : quick ? std::vector<std::array<int64_t, 3>>{{128, 4, 32}}
                                           : std::vector<std::array<int64_t, 3>>{{256, 8, 64}, {1024, 8, 64}}) {
    torch::AutoGradMode grad(true);
    int64_t batch = quick ? 2 : 4;
    auto q = torch::randn({batch, heads, seq, head_dim}, opts).requires_grad_(true);
    auto k = torch::randn({batch, heads, seq, head_dim}, opts).requires_grad_(true);
    auto v = torch::randn({batch, heads, seq, head_dim}, opts).requires_grad_(true);
    auto causal = torch::ones({seq, seq}, opts.dtype(torch::kBool)).triu(1);
    double s = time_of([&] {
      auto scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(head_dim));
      auto out_t = at::matmul(at::softmax(scores.masked_fill(causal, -1e30), -1), v);
      out_t.sum().backward();
    }, budget);
    // forward + backward = 3 x the forward's 4 b h s^2 d FLOPs, half of them under the causal mask
    double flops = 3.0 * 4.0 * batch * heads * double(seq) * seq * head_dim / 2.0;
    out["attention"].push_back({{"batch", batch}, {"seq", seq}, {"heads", heads}, {"head_dim", head_dim},
                                {"fwd_bwd_s", s}, {"tflops", flops / s / 1e12}});
  }

  // layer: a pre-norm transformer layer (4x MLP), forward + backward, by the 6 x params rule
  out["layer"] = nlohmann::json::array();
  for (int64_t hidden : quick ? std::vector<int64_t>{128} : std::vector<int64_t>{256, 768}) {
    torch::AutoGradMode grad(true);
    int64_t heads = hidden / 64 > 0 ? hidden / 64 : 1, seq = quick ? 64 : 256, batch = quick ? 2 : 4;
    auto layer = torch::nn::TransformerEncoderLayer(
        torch::nn::TransformerEncoderLayerOptions(hidden, heads).dim_feedforward(4 * hidden).dropout(0.0));
    auto x = torch::randn({seq, batch, hidden}, opts).requires_grad_(true);
    double s = time_of([&] { layer->forward(x).sum().backward(); }, budget);
    int64_t params = 0;
    for (auto& p : layer->parameters()) params += p.numel();
    double tokens = double(seq) * batch;
    double flops = 6.0 * params * tokens + 12.0 * hidden * seq * tokens;
    out["layer"].push_back({{"hidden", hidden}, {"heads", heads}, {"tokens", tokens}, {"seq", seq},
                            {"dtype", "float32"}, {"params", params}, {"fwd_bwd_s", s}, {"tflops", flops / s / 1e12}});
  }

  // copy: bytes read + written per second
  {
    int64_t n = quick ? (1 << 20) : (1 << 25);
    auto src = torch::randn({n}, opts), dst = torch::empty({n}, opts);
    double s = time_of([&] { dst.copy_(src); }, budget);
    out["copy_GBps"] = 2.0 * 4.0 * double(n) / s / 1e9;
  }
}

}  // namespace

nlohmann::json profile_device(const ProfileOptions& o) {
  if (o.device != "cpu" && o.device != "cuda")
    throw Error(fmt::format("profile-device: --device must be cpu or cuda, got '{}'", o.device));
  bool cuda = o.device == "cuda";
  if (cuda && !torch::cuda::is_available())
    throw Error("profile-device: --device cuda, but this build of LibTorch sees no CUDA device");
  int threads_before = at::get_num_threads();
  if (o.threads > 0) at::set_num_threads(o.threads);
  torch::NoGradGuard no_grad;
  nlohmann::json out;
  out["device"] = cuda ? "cuda" : fmt::format("cpu ({} threads)", at::get_num_threads());
  out["torch"] = TORCH_VERSION;
  out["memory_bytes"] = total_memory_bytes(o);
  out["memory_shared"] = !cuda;  // the ranks of a node share the CPU's memory

  if (cuda)
    profile_cuda(out, o.quick);
  else
    profile_cpu(out, o.quick);

  // links are not measured here: what the planner assumes for them
  out["links"] = cuda ? nlohmann::json{{"intra_GBps", 450}, {"intra_latency_us", 5}, {"inter_GBps", 50},
                                       {"inter_latency_us", 10}, {"source", "H100 SXM data sheet (assumed)"}}
                      : nlohmann::json{{"intra_GBps", 2}, {"intra_latency_us", 50}, {"inter_GBps", 1.25},
                                       {"inter_latency_us", 100}, {"source", "Gloo over loopback TCP (assumed)"}};
  at::set_num_threads(threads_before);
  return out;
}

}  // namespace slapo::plan
