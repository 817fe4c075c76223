// The CUDA kernels against double-precision CPU references on random inputs, forward and
// backward (max error relative to max(1, |reference|) below 1e-3 in float32). Needs a GPU: with
// none it says so and exits 0 (it still compiles everywhere with the kernels).
//   build-cuda/slapo_cuda_check
#include <cuda_runtime.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "cuda/launchers.h"

namespace {

using Vec = std::vector<float>;
std::mt19937 rng(7);

Vec randn(size_t n, float scale = 1.f) {
  std::normal_distribution<float> dist(0.f, scale);
  Vec v(n);
  for (auto& x : v) x = dist(rng);
  return v;
}

// A device copy of a host vector (or n zeros), freed at exit.
struct Dev {
  float* p = nullptr;
  size_t n;
  explicit Dev(const Vec& v) : n(v.size()) {
    cudaMalloc(&p, n * sizeof(float));
    cudaMemcpy(p, v.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  }
  explicit Dev(size_t count) : n(count) {
    cudaMalloc(&p, n * sizeof(float));
    cudaMemset(p, 0, n * sizeof(float));
  }
  ~Dev() { cudaFree(p); }
  Vec host() const {
    Vec v(n);
    cudaDeviceSynchronize();
    cudaMemcpy(v.data(), p, n * sizeof(float), cudaMemcpyDeviceToHost);
    return v;
  }
};

int failures = 0;

void expect_close(const std::string& what, const Vec& got, const std::vector<double>& want, double bound = 1e-3) {
  double worst = 0;
  for (size_t i = 0; i < want.size(); ++i)
    worst = std::max(worst, std::abs(double(got[i]) - want[i]) / std::max(1.0, std::abs(want[i])));
  bool ok = worst < bound && got.size() == want.size();
  std::printf("%s %s: max relative error %.2e\n", ok ? "ok  " : "FAIL", what.c_str(), worst);
  failures += !ok;
}

void expect_launch(const std::string& what, int rc) {
  if (rc != 0) {
    std::printf("FAIL %s: launch error %d (%s)\n", what.c_str(), rc, cudaGetErrorString(cudaError_t(rc)));
    ++failures;
  }
}

void check_rms_norm() {
  const int64_t rows = 37, cols = 300;
  Vec x = randn(rows * cols), w = randn(cols), dy = randn(rows * cols);
  Dev dx_(x), dw_(w), ddy(dy), y(rows * cols), inv(rows), dxo(rows * cols), dwo(cols), scratch(rows * cols);
  expect_launch("rms_norm forward", slapo::cuda::rms_norm_forward(dx_.p, dw_.p, y.p, inv.p, rows, cols, 1e-6f, nullptr));
  expect_launch("rms_norm backward", slapo::cuda::rms_norm_backward(ddy.p, dx_.p, dw_.p, inv.p, dxo.p, dwo.p, scratch.p,
                                                                    rows, cols, nullptr));
  std::vector<double> ry(rows * cols), rdx(rows * cols), rdw(cols, 0.0);
  for (int64_t r = 0; r < rows; ++r) {
    double sq = 0, dot = 0;
    for (int64_t c = 0; c < cols; ++c) sq += double(x[r * cols + c]) * x[r * cols + c];
    const double s = 1 / std::sqrt(sq / cols + 1e-6);
    for (int64_t c = 0; c < cols; ++c) dot += double(w[c]) * dy[r * cols + c] * x[r * cols + c];
    for (int64_t c = 0; c < cols; ++c) {
      ry[r * cols + c] = w[c] * x[r * cols + c] * s;
      rdx[r * cols + c] = s * w[c] * dy[r * cols + c] - x[r * cols + c] * s * s * s * dot / cols;
      rdw[c] += double(dy[r * cols + c]) * x[r * cols + c] * s;
    }
  }
  expect_close("rms_norm y", y.host(), ry);
  expect_close("rms_norm dx", dxo.host(), rdx);
  expect_close("rms_norm dweight", dwo.host(), rdw);
}

void check_swiglu_and_rope() {
  const int64_t n = 5000;
  Vec g = randn(n, 2), u = randn(n), dy = randn(n);
  Dev dg(g), du(u), ddy(dy), y(n), dgo(n), duo(n);
  expect_launch("swiglu forward", slapo::cuda::swiglu_forward(dg.p, du.p, y.p, n, nullptr));
  expect_launch("swiglu backward", slapo::cuda::swiglu_backward(ddy.p, dg.p, du.p, dgo.p, duo.p, n, nullptr));
  std::vector<double> ry(n), rdg(n), rdu(n);
  for (int64_t i = 0; i < n; ++i) {
    const double s = 1 / (1 + std::exp(-double(g[i])));
    ry[i] = g[i] * s * u[i];
    rdg[i] = dy[i] * u[i] * (s + g[i] * s * (1 - s));
    rdu[i] = dy[i] * g[i] * s;
  }
  expect_close("swiglu y", y.host(), ry);
  expect_close("swiglu dgate", dgo.host(), rdg);
  expect_close("swiglu dup", duo.host(), rdu);

  const int64_t B = 2, H = 3, S = 5, D = 8, half = D / 2;
  Vec x = randn(B * H * S * D), cs = randn(B * S * D), sn = randn(B * S * D);
  Dev dx(x), dc(cs), ds(sn), out(B * H * S * D), back(B * H * S * D);
  expect_launch("rope", slapo::cuda::rope(dx.p, dc.p, ds.p, out.p, B, H, S, D, false, nullptr));
  std::vector<double> ref(B * H * S * D);
  for (int64_t row = 0; row < B * H * S; ++row) {
    const int64_t b = row / (H * S), s = row % S;
    for (int64_t i = 0; i < half; ++i) {
      const int64_t o = (b * S + s) * D;
      ref[row * D + i] = double(x[row * D + i]) * cs[o + i] - double(x[row * D + i + half]) * sn[o + i];
      ref[row * D + i + half] = double(x[row * D + i + half]) * cs[o + i + half] + double(x[row * D + i]) * sn[o + i + half];
    }
  }
  expect_close("rope", out.host(), ref);
}

void check_masked_softmax() {
  const int64_t B = 2, H = 3, Sq = 7, Sk = 40, rows = B * H * Sq;
  Vec s = randn(rows * Sk, 3), mask(B * Sk, 0.f), dy = randn(rows * Sk);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t j = 30; j < Sk; ++j) mask[b * Sk + j] = -1e9f;  // padding mask [B, 1, 1, Sk]
  slapo::cuda::MaskLayout layout;
  layout.dims = 3;
  int64_t sizes[3] = {B, H, Sq}, strides[3] = {Sk, 0, 0};
  for (int d = 0; d < 3; ++d) layout.sizes[d] = sizes[d], layout.strides[d] = strides[d];
  Dev ds_(s), dm(mask), ddy(dy), y(rows * Sk), dso(rows * Sk);
  const float scale = 0.25f;
  expect_launch("masked_softmax forward",
                slapo::cuda::masked_softmax_forward(ds_.p, dm.p, layout, y.p, rows, Sk, scale, nullptr));
  Vec yh = y.host();
  expect_launch("masked_softmax backward", slapo::cuda::masked_softmax_backward(ddy.p, y.p, dso.p, rows, Sk, scale, nullptr));
  std::vector<double> ry(rows * Sk), rds(rows * Sk);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t b = r / (H * Sq);
    double peak = -1e300, sum = 0, dot = 0;
    for (int64_t c = 0; c < Sk; ++c) peak = std::max(peak, double(s[r * Sk + c]) * scale + mask[b * Sk + c]);
    for (int64_t c = 0; c < Sk; ++c) sum += std::exp(double(s[r * Sk + c]) * scale + mask[b * Sk + c] - peak);
    for (int64_t c = 0; c < Sk; ++c) {
      ry[r * Sk + c] = std::exp(double(s[r * Sk + c]) * scale + mask[b * Sk + c] - peak) / sum;
      dot += dy[r * Sk + c] * ry[r * Sk + c];
    }
    for (int64_t c = 0; c < Sk; ++c) rds[r * Sk + c] = scale * ry[r * Sk + c] * (dy[r * Sk + c] - dot);
  }
  expect_close("masked_softmax y", yh, ry);
  expect_close("masked_softmax dscores", dso.host(), rds);
}

void check_layer_norm_tail() {
  const int64_t rows = 19, cols = 96;
  Vec x = randn(rows * cols), b = randn(cols), res = randn(rows * cols), w = randn(cols), lb = randn(cols);
  Vec keep(rows * cols), dy = randn(rows * cols);
  for (size_t i = 0; i < keep.size(); ++i) keep[i] = (rng() % 10) < 8 ? 1.f : 0.f;
  const float keep_scale = 1.f / 0.8f;
  Dev dx_(x), db(b), dres(res), dw(w), dlb(lb), dkeep(keep), ddy(dy), y(rows * cols), normed(rows * cols), rstd(rows);
  Dev gx(rows * cols), gb(cols), gres(rows * cols), gw(cols), glb(cols), scratch(rows * cols);
  expect_launch("layer_norm_tail forward",
                slapo::cuda::layer_norm_tail_forward(dx_.p, db.p, dres.p, dkeep.p, keep_scale, dw.p, dlb.p, y.p,
                                                     normed.p, rstd.p, rows, cols, 1e-5f, nullptr));
  expect_launch("layer_norm_tail backward",
                slapo::cuda::layer_norm_tail_backward(ddy.p, normed.p, rstd.p, dw.p, dkeep.p, keep_scale, gx.p, gb.p,
                                                      gres.p, gw.p, glb.p, scratch.p, rows, cols, nullptr));
  std::vector<double> ry(rows * cols), rgx(rows * cols), rgres(rows * cols), rgb(cols, 0), rgw(cols, 0), rglb(cols, 0);
  for (int64_t r = 0; r < rows; ++r) {
    std::vector<double> h(cols), n(cols);
    double mean = 0, var = 0;
    for (int64_t c = 0; c < cols; ++c) {
      h[c] = (double(x[r * cols + c]) + b[c]) * keep[r * cols + c] * keep_scale + res[r * cols + c];
      mean += h[c] / cols;
    }
    for (int64_t c = 0; c < cols; ++c) var += (h[c] - mean) * (h[c] - mean) / cols;
    const double rs = 1 / std::sqrt(var + 1e-5);
    double mg = 0, mgn = 0;
    for (int64_t c = 0; c < cols; ++c) {
      n[c] = (h[c] - mean) * rs;
      ry[r * cols + c] = n[c] * w[c] + lb[c];
      mg += double(dy[r * cols + c]) * w[c] / cols;
      mgn += double(dy[r * cols + c]) * w[c] * n[c] / cols;
    }
    for (int64_t c = 0; c < cols; ++c) {
      const double dh = rs * (double(dy[r * cols + c]) * w[c] - mg - n[c] * mgn);
      rgres[r * cols + c] = dh;
      rgx[r * cols + c] = dh * keep[r * cols + c] * keep_scale;
      rgb[c] += rgx[r * cols + c];
      rgw[c] += dy[r * cols + c] * n[c];
      rglb[c] += dy[r * cols + c];
    }
  }
  expect_close("layer_norm_tail y", y.host(), ry);
  expect_close("layer_norm_tail dx", gx.host(), rgx);
  expect_close("layer_norm_tail dresidual", gres.host(), rgres);
  expect_close("layer_norm_tail dbias", gb.host(), rgb);
  expect_close("layer_norm_tail dweight", gw.host(), rgw);
  expect_close("layer_norm_tail dln_bias", glb.host(), rglb);
}

void check_attention(bool causal) {
  const int64_t BH = 3, Sq = 45, Sk = 45, D = 64;
  Vec q = randn(BH * Sq * D), k = randn(BH * Sk * D), v = randn(BH * Sk * D), dout = randn(BH * Sq * D);
  Dev dq_(q), dk_(k), dv_(v), ddo(dout), out(BH * Sq * D), lse(BH * Sq), gq(BH * Sq * D), gk(BH * Sk * D), gv(BH * Sk * D);
  expect_launch("attention forward", slapo::cuda::attention_forward(dq_.p, dk_.p, dv_.p, out.p, lse.p, BH, Sq, Sk, D,
                                                                    causal, nullptr));
  expect_launch("attention backward", slapo::cuda::attention_backward(ddo.p, dq_.p, dk_.p, dv_.p, out.p, lse.p, gq.p, gk.p,
                                                                      gv.p, BH, Sq, Sk, D, causal, nullptr));
  const double scale = 1 / std::sqrt(double(D));
  std::vector<double> ro(BH * Sq * D, 0), rq(BH * Sq * D, 0), rk(BH * Sk * D, 0), rv(BH * Sk * D, 0);
  for (int64_t bh = 0; bh < BH; ++bh)
    for (int64_t i = 0; i < Sq; ++i) {
      const int64_t last = causal ? std::min(Sk, i + (Sk - Sq) + 1) : Sk;
      std::vector<double> p(last);
      double peak = -1e300, sum = 0;
      for (int64_t j = 0; j < last; ++j) {
        double s = 0;
        for (int64_t c = 0; c < D; ++c) s += double(q[(bh * Sq + i) * D + c]) * k[(bh * Sk + j) * D + c];
        p[j] = s * scale;
        peak = std::max(peak, p[j]);
      }
      for (int64_t j = 0; j < last; ++j) sum += (p[j] = std::exp(p[j] - peak));
      for (int64_t j = 0; j < last; ++j) p[j] /= sum;
      for (int64_t j = 0; j < last; ++j)
        for (int64_t c = 0; c < D; ++c) ro[(bh * Sq + i) * D + c] += p[j] * v[(bh * Sk + j) * D + c];
      double delta = 0;
      for (int64_t c = 0; c < D; ++c) delta += dout[(bh * Sq + i) * D + c] * ro[(bh * Sq + i) * D + c];
      for (int64_t j = 0; j < last; ++j) {
        double dp = 0;
        for (int64_t c = 0; c < D; ++c) dp += double(dout[(bh * Sq + i) * D + c]) * v[(bh * Sk + j) * D + c];
        const double ds = p[j] * (dp - delta) * scale;
        for (int64_t c = 0; c < D; ++c) {
          rq[(bh * Sq + i) * D + c] += ds * k[(bh * Sk + j) * D + c];
          rk[(bh * Sk + j) * D + c] += ds * q[(bh * Sq + i) * D + c];
          rv[(bh * Sk + j) * D + c] += p[j] * dout[(bh * Sq + i) * D + c];
        }
      }
    }
  std::string tag = causal ? " (causal)" : "";
  expect_close("attention out" + tag, out.host(), ro);
  expect_close("attention dq" + tag, gq.host(), rq);
  expect_close("attention dk" + tag, gk.host(), rk);
  expect_close("attention dv" + tag, gv.host(), rv);
}

}  // namespace

int main() {
  const char* error = nullptr;
  int devices = slapo::cuda::device_count(&error);
  if (devices <= 0) {
    // 77: skipped, as automake's test drivers read it; never a pass
    std::printf("skip: no GPU: cuda kernel self-check (%s)\n", error ? error : "no device visible");
    return 77;
  }
  check_rms_norm();
  check_swiglu_and_rope();
  check_masked_softmax();
  check_layer_norm_tail();
  check_attention(false);
  check_attention(true);
  std::printf("%s\n", failures ? "CUDA kernel checks FAILED" : "CUDA kernels match the references");
  return failures ? 1 : 0;
}
