// Fused kernels against the unfused ATen reference, forward and backward, on fresh random inputs.
// Bounds: max relative error (|a - b| / max(1, |b|)) below 1e-12 in float64, 1e-5 in float32.
#include <torch/torch.h>
#include <doctest/doctest.h>

#include <limits>

#include "kernels.h"

namespace {

double rel_error(const at::Tensor& got, const at::Tensor& want) {
  auto diff = (got.to(at::kDouble) - want.to(at::kDouble)).abs();
  auto scale = want.to(at::kDouble).abs().clamp_min(1.0);
  return (diff / scale).max().item<double>();
}

// Runs fn(inputs) and ref(inputs) with the same output gradient; returns the worst relative error
// over the output and every input gradient.
double compare(const std::vector<at::Tensor>& inputs,
               const std::function<at::Tensor(const std::vector<at::Tensor>&)>& fn,
               const std::function<at::Tensor(const std::vector<at::Tensor>&)>& ref) {
  auto leaves = [&] {
    std::vector<at::Tensor> out;
    for (auto& t : inputs) out.push_back(t.detach().clone().requires_grad_(true));
    return out;
  };
  auto a = leaves(), b = leaves();
  auto ya = fn(a), yb = ref(b);
  auto g = torch::randn_like(yb);
  ya.backward(g);
  yb.backward(g);
  double worst = rel_error(ya, yb);
  for (size_t i = 0; i < a.size(); ++i)
    if (b[i].grad().defined()) worst = std::max(worst, rel_error(a[i].grad(), b[i].grad()));
  return worst;
}

}  // namespace

TEST_CASE("kernels: bias_gelu (exact and tanh) matches gelu(x + b), forward and backward") {
  for (auto dtype : {at::kDouble, at::kFloat}) {
    double bound = dtype == at::kDouble ? 1e-12 : 1e-5;
    for (bool tanh_approx : {false, true}) {
      torch::manual_seed(tanh_approx ? 1 : 2);
      std::vector<at::Tensor> in{torch::randn({7, 5, 33}, dtype) * 3, torch::randn({33}, dtype)};
      double err = compare(
          in, [&](auto& t) { return slapo::kernels::bias_gelu(t[0], t[1], tanh_approx); },
          [&](auto& t) { return at::gelu(t[0] + t[1], tanh_approx ? "tanh" : "none"); });
      CHECK_MESSAGE(err < bound, "bias_gelu tanh=" << tanh_approx << " dtype=" << dtype << " err=" << err);
    }
  }
}

TEST_CASE("kernels: rms_norm matches LlamaRMSNorm's formula, forward and backward") {
  for (auto dtype : {at::kDouble, at::kFloat}) {
    torch::manual_seed(3);
    std::vector<at::Tensor> in{torch::randn({4, 9, 64}, dtype), torch::randn({64}, dtype)};
    double err = compare(
        in, [](auto& t) { return slapo::kernels::rms_norm(t[0], t[1], 1e-6); },
        [](auto& t) { return t[1] * (t[0] * at::rsqrt(t[0].pow(2).mean(-1, true) + 1e-6)); });
    CHECK_MESSAGE(err < (dtype == at::kDouble ? 1e-12 : 1e-5), "rms_norm err=" << err);
  }
}

TEST_CASE("kernels: swiglu matches silu(gate) * up, forward and backward") {
  for (auto dtype : {at::kDouble, at::kFloat}) {
    torch::manual_seed(4);
    std::vector<at::Tensor> in{torch::randn({6, 130}, dtype) * 4, torch::randn({6, 130}, dtype)};
    double err = compare(
        in, [](auto& t) { return slapo::kernels::swiglu(t[0], t[1]); },
        [](auto& t) { return at::silu(t[0]) * t[1]; });
    CHECK_MESSAGE(err < (dtype == at::kDouble ? 1e-12 : 1e-5), "swiglu err=" << err);
  }
}

TEST_CASE("kernels: rope matches x*cos + rotate_half(x)*sin, forward and backward") {
  torch::manual_seed(5);
  int64_t B = 2, H = 3, S = 5, D = 8;
  auto freqs = torch::randn({B, S, D / 2}, at::kDouble);
  auto emb = at::cat({freqs, freqs}, -1);
  auto cos = emb.cos(), sin = emb.sin();
  std::vector<at::Tensor> in{torch::randn({B, H, S, D}, at::kDouble)};
  double err = compare(
      in, [&](auto& t) { return slapo::kernels::rope(t[0], cos, sin); },
      [&](auto& t) {
        auto halves = t[0].chunk(2, -1);
        auto rotated = at::cat({-halves[1], halves[0]}, -1);
        return t[0] * cos.unsqueeze(1) + rotated * sin.unsqueeze(1);
      });
  CHECK_MESSAGE(err < 1e-12, "rope err=" << err);
}

TEST_CASE("kernels: bad inputs raise errors naming the op") {
  auto x = torch::randn({2, 4});
  CHECK_THROWS_WITH(slapo::kernels::bias_gelu(x, torch::randn({3}), false),
                    doctest::Contains("bias_gelu: bias must be 1-d with x's last size 4"));
  CHECK_THROWS_WITH(slapo::kernels::swiglu(x, torch::randn({4, 2})), doctest::Contains("swiglu: gate [2, 4] and up [4, 2]"));
  CHECK_THROWS_WITH(slapo::kernels::rms_norm(x.to(at::kLong), torch::ones({4}), 1e-6),
                    doctest::Contains("rms_norm: x must be a float32, float64, bfloat16 or float16 tensor"));
}

TEST_CASE("kernels: memory-efficient attention matches softmax(q k^T / sqrt(d)) v, forward and backward") {
  // one tile; several query and key tiles with the causal diagonal crossing them; Sq < Sk
  for (auto [Sq, Sk] : {std::pair<int64_t, int64_t>{5, 7}, {200, 200}, {150, 300}})
  for (bool causal : {false, true}) {
    torch::manual_seed(causal ? 8 : 9);
    int64_t B = 2, H = 3, D = 8;
    std::vector<at::Tensor> in{torch::randn({B, H, Sq, D}, at::kDouble), torch::randn({B, H, Sk, D}, at::kDouble),
                               torch::randn({B, H, Sk, D}, at::kDouble)};
    double err = compare(
        in, [&](auto& t) { return slapo::kernels::attention(t[0], t[1], t[2], causal); },
        [&](auto& t) {
          auto scores = at::matmul(t[0], t[1].transpose(-1, -2)) / std::sqrt(double(D));
          if (causal) {  // query i sees keys j <= i + (Sk - Sq), as the zoo's causal mask
            auto future = torch::ones({Sq, Sk}, at::kBool).triu(Sk - Sq + 1);
            scores = scores.masked_fill(future, -std::numeric_limits<double>::infinity());
          }
          return at::matmul(at::softmax(scores, -1), t[2]);
        });
    CHECK_MESSAGE(err < 1e-12, "attention Sq=" << Sq << " Sk=" << Sk << " causal=" << causal << " err=" << err);
  }
}

TEST_CASE("kernels: masked_softmax matches softmax(s * scale + mask), padding and causal masks") {
  for (auto dtype : {at::kDouble, at::kFloat}) {
    double bound = dtype == at::kDouble ? 1e-12 : 1e-5;
    torch::manual_seed(11);
    auto padding = torch::zeros({3, 1, 1, 17}, dtype);
    padding.narrow(3, 12, 5).fill_(std::numeric_limits<float>::lowest());
    auto causal = torch::zeros({1, 1, 17, 17}, dtype).masked_fill(torch::ones({17, 17}, at::kBool).triu(1),
                                                                  std::numeric_limits<float>::lowest());
    for (auto& mask : {padding, causal}) {
      std::vector<at::Tensor> in{torch::randn({3, 4, 17, 17}, dtype) * 4};
      double err = compare(
          in, [&](auto& t) { return slapo::kernels::masked_softmax(t[0], mask, 0.25); },
          [&](auto& t) { return at::softmax(t[0] * 0.25 + mask, -1); });
      CHECK_MESSAGE(err < bound, "masked_softmax dtype=" << dtype << " err=" << err);
    }
  }
  CHECK_THROWS_WITH(slapo::kernels::masked_softmax(torch::randn({2, 3, 4}), torch::zeros({5}), 1.0),
                    "masked_softmax: mask [5] does not broadcast to scores [2, 3, 4]");
}

TEST_CASE("kernels: bias_dropout_add_layer_norm matches layer_norm(dropout(x + b) + residual)") {
  for (auto dtype : {at::kDouble, at::kFloat}) {
    double bound = dtype == at::kDouble ? 1e-12 : 1e-5;
    for (double p : {0.0, 0.3}) {
      torch::manual_seed(12);
      std::vector<at::Tensor> in{torch::randn({5, 7, 48}, dtype), torch::randn({48}, dtype),
                                 torch::randn({5, 7, 48}, dtype), torch::randn({48}, dtype) + 1,
                                 torch::randn({48}, dtype)};
      // both sides draw the dropout mask from the same generator state
      double err = compare(
          in,
          [&](auto& t) {
            torch::manual_seed(99);
            return slapo::kernels::bias_dropout_add_layer_norm(t[0], t[1], t[2], t[3], t[4], p, true, 1e-5);
          },
          [&](auto& t) {
            torch::manual_seed(99);
            auto h = at::dropout(t[0] + t[1], p, true) + t[2];
            return at::layer_norm(h, {48}, t[3], t[4], 1e-5);
          });
      CHECK_MESSAGE(err < bound, "bias_dropout_add_layer_norm p=" << p << " dtype=" << dtype << " err=" << err);
    }
  }
  CHECK_THROWS_WITH(slapo::kernels::bias_dropout_add_layer_norm(torch::randn({2, 8}), torch::randn({4}),
                                                                torch::randn({2, 8}), torch::ones({8}),
                                                                torch::zeros({8}), 0.1, true, 1e-5),
                    "bias_dropout_add_layer_norm: bias must be 1-d with x's last size 8, got shape [4]");
}
