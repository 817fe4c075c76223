// The GPU's rows of a device profile, at the shapes stdlib/devices/h100.json has: matmuls of 2,048
// to 16,384 tokens, causal attention through scaled_dot_product_attention (the kernel the models
// run on LibTorch 2.x), and a pre-norm transformer layer built from the same ops as the zoo's,
// each in bfloat16 (and float32 where the planner may plan for it).
#include "plan/profile_cuda.h"

#include <torch/torch.h>
#include <torch/version.h>  // TORCH_VERSION_MAJOR: scaled_dot_product_attention from 2.0

#include <array>
#include <cmath>

#include "plan/profile_device.h"

#ifdef SLAPO_WITH_TORCH_CUDA
#include <ATen/cuda/CUDAContext.h>
#endif

namespace slapo::plan {

namespace {

torch::Dtype dtype_of(const std::string& name) { return name == "bfloat16" ? torch::kBFloat16 : torch::kFloat32; }

// Causal attention, batch x heads x seq x head_dim, forward; the fused kernel where LibTorch has one.
at::Tensor causal_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
#if TORCH_VERSION_MAJOR >= 2
  return at::scaled_dot_product_attention(q, k, v, {}, 0.0, /*is_causal=*/true);
#else
  auto seq = q.size(-2);
  auto causal = torch::ones({seq, seq}, q.options().dtype(torch::kBool)).triu(1);
  auto scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(double(q.size(-1)));
  return at::matmul(at::softmax(scores.masked_fill(causal, -1e30), -1), v);
#endif
}

// One pre-norm layer (fused q/k/v, causal attention, 4x GELU MLP), forward + backward, seconds.
double layer_seconds(int64_t hidden, int64_t heads, int64_t batch, int64_t seq, torch::TensorOptions like,
                     double budget) {
  torch::AutoGradMode grad(true);
  auto weight = [&](int64_t out, int64_t in) {
    return (torch::randn({out, in}, like) / std::sqrt(double(in))).requires_grad_(true);
  };
  auto qkv = weight(3 * hidden, hidden), o = weight(hidden, hidden);
  auto up = weight(4 * hidden, hidden), down = weight(hidden, 4 * hidden);
  auto x = torch::randn({batch, seq, hidden}, like).requires_grad_(true);
  int64_t head_dim = hidden / heads;
  return time_of([&] {
    auto h = at::layer_norm(x, {hidden});
    auto parts = at::linear(h, qkv).view({batch, seq, 3, heads, head_dim}).permute({2, 0, 3, 1, 4});
    auto context = causal_attention(parts[0], parts[1], parts[2]).transpose(1, 2).reshape({batch, seq, hidden});
    auto y = x + at::linear(context, o);
    auto out = y + at::linear(at::gelu(at::linear(at::layer_norm(y, {hidden}), up)), down);
    out.sum().backward();
  }, budget, true);
}

}  // namespace

void profile_cuda(nlohmann::json& out, bool quick) {
  auto opts = torch::TensorOptions().device(torch::kCUDA);
  const double budget = quick ? 0.02 : 0.1;
#ifdef SLAPO_WITH_TORCH_CUDA
  auto* properties = at::cuda::getCurrentDeviceProperties();
  out["device"] = properties->name;
  out["memory_bytes"] = static_cast<double>(properties->totalGlobalMem);
#endif

  std::vector<int64_t> tokens = quick ? std::vector<int64_t>{2048} : std::vector<int64_t>{2048, 8192, 16384};
  std::vector<std::array<int64_t, 2>> widths =  // k x n: attention, MLP and LM-head projections
      quick ? std::vector<std::array<int64_t, 2>>{{1024, 4096}}
            : std::vector<std::array<int64_t, 2>>{{1024, 1024}, {1024, 4096}, {4096, 1024}, {2048, 2048},
                                                  {2048, 8192}, {4096, 4096}, {4096, 16384}, {8192, 8192},
                                                  {8192, 32768}, {1024, 32000}, {2048, 50304}};
  out["matmul"] = nlohmann::json::array();
  for (std::string dtype : {"bfloat16", "float32"}) {
    for (int64_t m : tokens) {
      for (auto [k, n] : widths) {
        auto like = opts.dtype(dtype_of(dtype));
        auto a = torch::randn({m, k}, like), b = torch::randn({k, n}, like);
        double s = time_of([&] { (void)at::matmul(a, b); }, budget, true);
        out["matmul"].push_back({{"dtype", dtype}, {"m", m}, {"k", k}, {"n", n}, {"s", s},
                                 {"tflops", 2.0 * m * k * n / s / 1e12}});
      }
    }
  }

  // attention: causal, bfloat16, 16,384 tokens a call; TFLOP/s counts half the score matrix
  out["attention"] = nlohmann::json::array();
  for (int64_t seq : quick ? std::vector<int64_t>{1024} : std::vector<int64_t>{512, 1024, 2048, 4096, 8192}) {
    for (auto [heads, head_dim] : std::vector<std::array<int64_t, 2>>{{16, 64}, {32, 64}, {16, 128}, {32, 128}}) {
      torch::AutoGradMode grad(true);
      int64_t batch = 16384 / seq;
      auto like = opts.dtype(torch::kBFloat16);
      auto q = torch::randn({batch, heads, seq, head_dim}, like).requires_grad_(true);
      auto k = torch::randn({batch, heads, seq, head_dim}, like).requires_grad_(true);
      auto v = torch::randn({batch, heads, seq, head_dim}, like).requires_grad_(true);
      double s = time_of([&] { causal_attention(q, k, v).sum().backward(); }, budget, true);
      double flops = 3.0 * 4.0 * batch * heads * double(seq) * seq * head_dim / 2.0;
      out["attention"].push_back({{"batch", batch}, {"seq", seq}, {"heads", heads}, {"head_dim", head_dim},
                                  {"fwd_bwd_s", s}, {"tflops", flops / s / 1e12}});
      if (quick) break;
    }
  }

  // layer: 4 x 2,048 tokens, by the 6 x params + 12 x width x seq rule
  out["layer"] = nlohmann::json::array();
  std::vector<std::array<int64_t, 2>> layers =
      quick ? std::vector<std::array<int64_t, 2>>{{1024, 16}}
            : std::vector<std::array<int64_t, 2>>{{768, 12}, {1024, 16}, {2048, 16}, {4096, 32}, {8192, 64}};
  for (std::string dtype : {"bfloat16", "float32"}) {
    for (auto [hidden, heads] : layers) {
      if (dtype == "float32" && hidden > 2048) continue;  // float32 rows for the small widths it trains
      const int64_t batch = 4, seq = 2048;
      double s = layer_seconds(hidden, heads, batch, seq, opts.dtype(dtype_of(dtype)), budget);
      double params = 12.0 * hidden * hidden, tokens = double(batch * seq);
      double flops = 6.0 * params * tokens + 12.0 * hidden * seq * tokens;
      out["layer"].push_back({{"hidden", hidden}, {"heads", heads}, {"tokens", tokens}, {"seq", seq},
                              {"dtype", dtype}, {"params", params}, {"fwd_bwd_s", s}, {"tflops", flops / s / 1e12}});
    }
  }

  {  // copy: 256 MiB, bytes read + written per second
    int64_t n = quick ? (1 << 22) : (1 << 26);
    auto src = torch::randn({n}, opts), dst = torch::empty({n}, opts);
    double s = time_of([&] { dst.copy_(src); }, budget, true);
    out["copy_GBps"] = 2.0 * 4.0 * double(n) / s / 1e9;
  }
}

}  // namespace slapo::plan
