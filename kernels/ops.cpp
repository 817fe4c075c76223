// Registration of the fused kernels as custom ops ("slapo::bias_gelu", ...), with autograd
// Functions whose backward calls the hand-written backward kernels, and the kernels.h API.
#include <torch/version.h>  // TORCH_VERSION_MAJOR: the LibTorch 2.x paths
#include <torch/library.h>

#include <cmath>
#include <limits>

#include "core/error.h"
#include "cpu/cpu_kernels.h"
#include "kernels.h"
#ifdef SLAPO_CUDA_OPS
#include "cuda/torch_kernels.h"
#endif

namespace slapo::kernels {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

// The kernel for the tensor's device: kernels/cpu, or kernels/cuda in CUDA builds of LibTorch.
#ifdef SLAPO_CUDA_OPS
#define ON_DEVICE(t, fn) ((t).is_cuda() ? cuda_tensors::fn : cpu::fn)
#else
#define ON_DEVICE(t, fn) cpu::fn
#endif

bool is_training_float(at::ScalarType type) {
  return type == at::kFloat || type == at::kDouble || type == at::kBFloat16 || type == at::kHalf;
}

void check_float(const at::Tensor& t, const char* op, const char* what) {
  if (!t.defined() || !is_training_float(t.scalar_type()))
    throw Error(fmt::format("{}: {} must be a float32, float64, bfloat16 or float16 tensor", op, what));
#ifdef SLAPO_CUDA_OPS
  if (!t.device().is_cpu() && !t.is_cuda())
    throw Error(fmt::format("{}: {} is on {}; the kernels run on CPU and CUDA", op, what, t.device().str()));
#else
  if (!t.device().is_cpu())
    throw Error(fmt::format("{}: {} is on {}; this build has the CPU kernels only", op, what, t.device().str()));
#endif
}

// The hand-written kernels take float32, and float64 on CPU. Other dtypes (bfloat16 and float16
// weights, or activations under autocast) run the op's meaning in ATen's ops (aten_math below), with
// ATen's autograd and autocast rules: a fused schedule trains in every precision, as fast as the
// unfused model there until kernels for those dtypes exist.
bool kernel_takes(const at::Tensor& t) {
  return t.scalar_type() == at::kFloat || (t.scalar_type() == at::kDouble && t.device().is_cpu());
}

namespace aten_math {

at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& bias, bool tanh_approx) {
  return at::gelu(x + bias, tanh_approx ? "tanh" : "none");
}

// LLaMA's: the statistics in float32, the normalised value back in the input's dtype, then the weight
at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  auto x32 = x.to(at::kFloat);
  auto normed = x32 * at::rsqrt(x32.pow(2).mean(-1, /*keepdim=*/true) + eps);
  return weight * normed.to(x.scalar_type());
}

at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) { return at::silu(gate) * up; }

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  const int64_t half = x.size(-1) / 2;
  auto rotated = at::cat({-x.narrow(-1, half, half), x.narrow(-1, 0, half)}, -1);  // rotate_half(x) = [-x2, x1]
  return x * cos.unsqueeze(1) + rotated * sin.unsqueeze(1);  // cos, sin [B, S, D] over every head
}

at::Tensor masked_softmax(const at::Tensor& scores, const at::Tensor& mask, double scale) {
  return at::softmax(scores * scale + mask.to(scores.scalar_type()), -1);
}

at::Tensor bias_dropout_add_layer_norm(const at::Tensor& x, const at::Tensor& bias, const at::Tensor& residual,
                                       const at::Tensor& weight, const at::Tensor& ln_bias, double p, bool training,
                                       double eps) {
  auto h = at::dropout(x + bias, p, training) + residual;
  return at::layer_norm(h, {x.size(-1)}, weight, ln_bias, eps);
}

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
  auto scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(static_cast<double>(q.size(-1)));
  if (causal) {
    const int64_t sq = q.size(-2), sk = k.size(-2);
    auto hidden = at::ones({sq, sk}, q.options().dtype(at::kBool)).triu(sk - sq + 1);  // bottom-right aligned
    scores = scores.masked_fill(hidden, -std::numeric_limits<double>::infinity());
  }
  return at::matmul(at::softmax(scores, -1), v);
}

}  // namespace aten_math

// Every tensor input of one call shares the first one's device and (except masks, which are
// converted) its dtype: a CPU helper tensor handed to a CUDA kernel would be read from host memory.
// Checked here, where both the Lua API and fused graphs (which call the ops directly) pass.
void check_inputs(const char* op, std::initializer_list<std::pair<const at::Tensor*, const char*>> inputs,
                  bool same_dtype = true) {
  const at::Tensor& first = *inputs.begin()->first;
  for (auto [t, what] : inputs) {
    if (!t->defined()) continue;
    check_float(*t, op, what);
    if (t->device() != first.device())
      throw Error(fmt::format("{}: {} is on {} but {} is on {}; move every input to one device", op, what,
                              t->device().str(), inputs.begin()->second, first.device().str()));
    if (same_dtype && t->scalar_type() != first.scalar_type())
      throw Error(fmt::format("{}: {} is {} but {} is {}; every input must have one dtype", op, what,
                              c10::toString(t->scalar_type()), inputs.begin()->second,
                              c10::toString(first.scalar_type())));
  }
}

struct BiasGeluFn : public torch::autograd::Function<BiasGeluFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& bias, bool tanh_approx) {
    check_inputs("bias_gelu", {{&x, "x"}, {&bias, "bias"}});
    ctx->save_for_backward({x, bias});
    ctx->saved_data["tanh"] = tanh_approx;
    return ON_DEVICE(x, bias_gelu_forward)(x, bias, tanh_approx);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto saved = ctx->get_saved_variables();
    auto [dx, dbias] = ON_DEVICE(saved[0], bias_gelu_backward)(grads[0], saved[0], saved[1], ctx->saved_data["tanh"].toBool());
    return {dx, dbias, at::Tensor()};
  }
};

struct RmsNormFn : public torch::autograd::Function<RmsNormFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, double eps) {
    check_inputs("rms_norm", {{&x, "x"}, {&weight, "weight"}});
    auto [y, inv] = ON_DEVICE(x, rms_norm_forward)(x, weight, eps);
    ctx->save_for_backward({x, weight, inv});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    auto [dx, dw] = ON_DEVICE(s[0], rms_norm_backward)(grads[0], s[0], s[1], s[2]);
    return {dx, dw, at::Tensor()};
  }
};

struct SwigluFn : public torch::autograd::Function<SwigluFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& gate, const at::Tensor& up) {
    check_inputs("swiglu", {{&gate, "gate"}, {&up, "up"}});
    ctx->save_for_backward({gate, up});
    return ON_DEVICE(gate, swiglu_forward)(gate, up);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    auto [dg, du] = ON_DEVICE(s[0], swiglu_backward)(grads[0], s[0], s[1]);
    return {dg, du};
  }
};

// cos and sin are constants of the position (no gradient flows to them).
struct RopeFn : public torch::autograd::Function<RopeFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
    check_inputs("rope", {{&x, "x"}, {&cos, "cos"}, {&sin, "sin"}});
    ctx->save_for_backward({cos, sin});
    return ON_DEVICE(x, rope_apply)(x, cos, sin, /*inverse=*/false);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    return {ON_DEVICE(s[0], rope_apply)(grads[0], s[0], s[1], /*inverse=*/true), at::Tensor(), at::Tensor()};
  }
};

struct AttentionFn : public torch::autograd::Function<AttentionFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            bool causal) {
    auto [out, lse] = ON_DEVICE(q, attention_forward)(q, k, v, causal);
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["causal"] = causal;
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    auto [dq, dk, dv] = ON_DEVICE(s[0], attention_backward)(grads[0], s[0], s[1], s[2], s[3], s[4], ctx->saved_data["causal"].toBool());
    return {dq, dk, dv, at::Tensor()};
  }
};

struct MaskedSoftmaxFn : public torch::autograd::Function<MaskedSoftmaxFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& scores, const at::Tensor& mask, double scale) {
    check_inputs("masked_softmax", {{&scores, "scores"}, {&mask, "mask"}}, /*same_dtype=*/false);
    auto y = ON_DEVICE(scores, masked_softmax_forward)(scores, mask, scale);
    ctx->save_for_backward({y});
    ctx->saved_data["scale"] = scale;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    return {ON_DEVICE(s[0], masked_softmax_backward)(grads[0], s[0], ctx->saved_data["scale"].toDouble()), at::Tensor(),
            at::Tensor()};
  }
};

struct BiasDropoutAddLayerNormFn : public torch::autograd::Function<BiasDropoutAddLayerNormFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& bias, const at::Tensor& residual,
                            const at::Tensor& weight, const at::Tensor& ln_bias, double p, bool training, double eps) {
    check_inputs("bias_dropout_add_layer_norm",
                 {{&x, "x"}, {&bias, "bias"}, {&residual, "residual"}, {&weight, "weight"}, {&ln_bias, "ln_bias"}});
    at::Tensor keep;  // drawn as F.dropout draws it: bernoulli(1 - p) over x's shape
    if (training && p > 0) keep = at::empty_like(x).bernoulli_(1 - p);
    double keep_scale = keep.defined() ? (p < 1 ? 1.0 / (1 - p) : 0.0) : 1.0;
    auto [y, normed, rstd] = ON_DEVICE(x, bias_dropout_add_layer_norm_forward)(x, bias, residual, weight, ln_bias, keep,
                                                                      keep_scale, eps);
    ctx->save_for_backward({normed, rstd, weight, keep});
    ctx->saved_data["keep_scale"] = keep_scale;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    auto s = ctx->get_saved_variables();
    auto g = ON_DEVICE(s[0], bias_dropout_add_layer_norm_backward)(grads[0], s[0], s[1], s[2], s[3],
                                                      ctx->saved_data["keep_scale"].toDouble());
    return {g[0], g[1], g[2], g[3], g[4], at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor masked_softmax_autograd(const at::Tensor& scores, const at::Tensor& mask, double scale) {
  if (!kernel_takes(scores)) return aten_math::masked_softmax(scores, mask, scale);
  return MaskedSoftmaxFn::apply(scores, mask, scale);
}
at::Tensor bias_dropout_add_layer_norm_autograd(const at::Tensor& x, const at::Tensor& bias, const at::Tensor& residual,
                                                const at::Tensor& weight, const at::Tensor& ln_bias, double p,
                                                bool training, double eps) {
  if (!kernel_takes(x)) return aten_math::bias_dropout_add_layer_norm(x, bias, residual, weight, ln_bias, p, training, eps);
  return BiasDropoutAddLayerNormFn::apply(x, bias, residual, weight, ln_bias, p, training, eps);
}

// On CPU the tiled kernel wins from about 192 keys on (bench: 1.33x the unfused time at 128 keys,
// 0.97 at 192, 0.84 at 256, 0.46 at 2048, forward + backward); below that the op runs ATen's
// matmul + softmax + matmul, with ATen's autograd.
constexpr int64_t kCpuTiledAttentionMinKeys = 192;

at::Tensor attention_autograd(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
  check_inputs("attention", {{&q, "q"}, {&k, "k"}, {&v, "v"}});  // every path below
  if (q.device().is_cpu() && k.size(-2) < kCpuTiledAttentionMinKeys) return aten_math::attention(q, k, v, causal);
#if defined(SLAPO_CUDA_OPS) && TORCH_VERSION_MAJOR >= 2
  // On CUDA, LibTorch 2.x's scaled_dot_product_attention (flash, memory-efficient or cuDNN) ran
  // 28x faster than this project's kernel at S = 2048 on an H100: the op keeps its meaning, ATen
  // does the work. Causal here is bottom-right aligned (the last query sees every key), which is
  // SDPA's is_causal only when there are as many queries as keys.
  if (q.is_cuda()) {
    const int64_t sq = q.size(-2), sk = k.size(-2);
    if (!causal || sq == sk) return at::scaled_dot_product_attention(q, k, v, {}, 0.0, causal);
    auto visible = at::ones({sq, sk}, q.options().dtype(at::kBool)).tril(sk - sq);
    return at::scaled_dot_product_attention(q, k, v, visible, 0.0, false);
  }
#endif
  if (!kernel_takes(q)) return aten_math::attention(q, k, v, causal);
  return AttentionFn::apply(q, k, v, causal);
}

at::Tensor bias_gelu_autograd(const at::Tensor& x, const at::Tensor& bias, bool tanh_approx) {
  if (!kernel_takes(x)) return aten_math::bias_gelu(x, bias, tanh_approx);
  return BiasGeluFn::apply(x, bias, tanh_approx);
}
at::Tensor rms_norm_autograd(const at::Tensor& x, const at::Tensor& weight, double eps) {
  if (!kernel_takes(x)) return aten_math::rms_norm(x, weight, eps);
  return RmsNormFn::apply(x, weight, eps);
}
at::Tensor swiglu_autograd(const at::Tensor& gate, const at::Tensor& up) {
  if (!kernel_takes(gate)) return aten_math::swiglu(gate, up);
  return SwigluFn::apply(gate, up);
}
at::Tensor rope_autograd(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  if (!kernel_takes(x)) return aten_math::rope(x, cos, sin);
  return RopeFn::apply(x, cos, sin);
}

}  // namespace

TORCH_LIBRARY(slapo, m) {
  m.def("bias_gelu(Tensor x, Tensor bias, bool tanh_approx) -> Tensor");
  m.def("rms_norm(Tensor x, Tensor weight, float eps) -> Tensor");
  m.def("swiglu(Tensor gate, Tensor up) -> Tensor");
  m.def("rope(Tensor x, Tensor cos, Tensor sin) -> Tensor");
  m.def("attention(Tensor q, Tensor k, Tensor v, bool causal) -> Tensor");
  m.def("masked_softmax(Tensor scores, Tensor mask, float scale) -> Tensor");
  m.def("bias_dropout_add_layer_norm(Tensor x, Tensor bias, Tensor residual, Tensor weight, Tensor ln_bias, "
        "float p, bool training, float eps) -> Tensor");
}

// The autograd Functions run the CPU kernels; a CUDA build registers its kernels here too.
TORCH_LIBRARY_IMPL(slapo, CompositeImplicitAutograd, m) {
  m.impl("bias_gelu", bias_gelu_autograd);
  m.impl("rms_norm", rms_norm_autograd);
  m.impl("swiglu", swiglu_autograd);
  m.impl("rope", rope_autograd);
  m.impl("attention", attention_autograd);
  m.impl("masked_softmax", masked_softmax_autograd);
  m.impl("bias_dropout_add_layer_norm", bias_dropout_add_layer_norm_autograd);
}

at::Tensor bias_gelu(const at::Tensor& x, const at::Tensor& bias, bool tanh_approx) {
  check_float(x, "bias_gelu", "x");
  check_float(bias, "bias_gelu", "bias");
  if (bias.dim() != 1 || x.size(-1) != bias.size(0))
    throw Error(fmt::format("bias_gelu: bias must be 1-d with x's last size {}, got shape [{}]", x.size(-1),
                            fmt::join(bias.sizes(), ", ")));
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("slapo::bias_gelu", "").typed<decltype(bias_gelu)>();
  return op.call(x, bias, tanh_approx);
}

at::Tensor rms_norm(const at::Tensor& x, const at::Tensor& weight, double eps) {
  check_float(x, "rms_norm", "x");
  check_float(weight, "rms_norm", "weight");
  if (weight.dim() != 1 || x.size(-1) != weight.size(0))
    throw Error(fmt::format("rms_norm: weight must be 1-d with x's last size {}, got shape [{}]", x.size(-1),
                            fmt::join(weight.sizes(), ", ")));
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("slapo::rms_norm", "").typed<decltype(rms_norm)>();
  return op.call(x, weight, eps);
}

at::Tensor swiglu(const at::Tensor& gate, const at::Tensor& up) {
  check_float(gate, "swiglu", "gate");
  check_float(up, "swiglu", "up");
  if (gate.sizes() != up.sizes())
    throw Error(fmt::format("swiglu: gate [{}] and up [{}] must have one shape", fmt::join(gate.sizes(), ", "),
                            fmt::join(up.sizes(), ", ")));
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("slapo::swiglu", "").typed<decltype(swiglu)>();
  return op.call(gate, up);
}

at::Tensor rope(const at::Tensor& x, const at::Tensor& cos, const at::Tensor& sin) {
  check_float(x, "rope", "x");
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("slapo::rope", "").typed<decltype(rope)>();
  return op.call(x, cos.to(x.scalar_type()), sin.to(x.scalar_type()));
}

}  // namespace slapo::kernels

namespace slapo::kernels {

at::Tensor attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal) {
  check_float(q, "attention", "q");
  check_float(k, "attention", "k");
  check_float(v, "attention", "v");
  static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("slapo::attention", "").typed<decltype(attention)>();
  return op.call(q, k, v, causal);
}

std::vector<std::string> sdpa_backends() {
#if defined(SLAPO_CUDA_OPS) && TORCH_VERSION_MAJOR >= 2
  return {"flash", "efficient"};
#else
  return {};
#endif
}

at::Tensor attention_sdpa(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                          const std::string& backend) {
  if (backend != "flash" && backend != "efficient")
    throw Error(fmt::format("kernels.attention: unknown backend '{}' (choices: auto, flash, efficient)", backend));
  check_inputs("attention", {{&q, "q"}, {&k, "k"}, {&v, "v"}});
#if defined(SLAPO_CUDA_OPS) && TORCH_VERSION_MAJOR >= 2
  if (q.is_cuda()) {
    // Only the named kernel is allowed for this call; the process's own choice comes back after.
    auto& ctx = at::globalContext();
    struct Allowed {
      bool flash, efficient, math;
    } before{ctx.userEnabledFlashSDP(), ctx.userEnabledMemEfficientSDP(), ctx.userEnabledMathSDP()};
    struct Restore {
      at::Context& ctx;
      Allowed allowed;
      ~Restore() {
        ctx.setSDPUseFlash(allowed.flash);
        ctx.setSDPUseMemEfficient(allowed.efficient);
        ctx.setSDPUseMath(allowed.math);
      }
    } restore{ctx, before};
#if TORCH_VERSION_MAJOR > 2 || TORCH_VERSION_MINOR >= 5
    struct RestoreCuDNN {
      at::Context& ctx;
      bool allowed;
      ~RestoreCuDNN() { ctx.setSDPUseCuDNN(allowed); }
    } restore_cudnn{ctx, ctx.userEnabledCuDNNSDP()};
    ctx.setSDPUseCuDNN(false);
#endif
    ctx.setSDPUseFlash(backend == "flash");
    ctx.setSDPUseMemEfficient(backend == "efficient");
    ctx.setSDPUseMath(false);
    const int64_t sq = q.size(-2), sk = k.size(-2);
    if (causal && sq != sk)
      throw Error(fmt::format("kernels.attention: backend '{}' takes causal attention with as many queries as keys "
                              "(here {} and {}); use backend = 'auto'", backend, sq, sk));
    try {
      return at::scaled_dot_product_attention(q, k, v, {}, 0.0, causal);
    } catch (const c10::Error& e) {
      std::string what = e.what_without_backtrace();
      throw Error(fmt::format("kernels.attention: SDPA's {} kernel does not take these inputs (q [{}] {}): {}", backend,
                              fmt::join(q.sizes(), ", "), c10::toString(q.scalar_type()),
                              what.substr(0, what.find('\n'))));
    }
  }
  throw Error(fmt::format("kernels.attention: backend '{}' runs on CUDA tensors, and q is on {}; move q, k and v to "
                          "the GPU or use backend = 'auto'", backend, q.device().str()));
#else
#if defined(SLAPO_CUDA_OPS)
  const char* build = "with CUDA";
#else
  const char* build = "for the CPU";
#endif
  throw Error(fmt::format("kernels.attention: backend '{}' is LibTorch's scaled_dot_product_attention kernel of that "
                          "name, which needs a CUDA build of LibTorch 2.x; this build has LibTorch {} {} (choices "
                          "here: auto)", backend, TORCH_VERSION, build));
#endif
}

}  // namespace slapo::kernels

namespace slapo::kernels {

at::Tensor masked_softmax(const at::Tensor& scores, const at::Tensor& mask, double scale) {
  check_float(scores, "masked_softmax", "scores");
  check_float(mask, "masked_softmax", "mask");
  if (!at::is_expandable_to(mask.sizes(), scores.sizes()))
    throw Error(fmt::format("masked_softmax: mask [{}] does not broadcast to scores [{}]", fmt::join(mask.sizes(), ", "),
                            fmt::join(scores.sizes(), ", ")));
  static auto op =
      c10::Dispatcher::singleton().findSchemaOrThrow("slapo::masked_softmax", "").typed<decltype(masked_softmax)>();
  return op.call(scores, mask, scale);
}

at::Tensor bias_dropout_add_layer_norm(const at::Tensor& x, const at::Tensor& bias, const at::Tensor& residual,
                                       const at::Tensor& weight, const at::Tensor& ln_bias, double p, bool training,
                                       double eps) {
  const char* op_name = "bias_dropout_add_layer_norm";
  check_float(x, op_name, "x");
  check_float(residual, op_name, "residual");
  if (residual.sizes() != x.sizes())
    throw Error(fmt::format("{}: residual [{}] must have x's shape [{}]", op_name, fmt::join(residual.sizes(), ", "),
                            fmt::join(x.sizes(), ", ")));
  for (auto [t, what] : {std::pair{&bias, "bias"}, {&weight, "weight"}, {&ln_bias, "ln_bias"}}) {
    check_float(*t, op_name, what);
    if (t->dim() != 1 || t->size(0) != x.size(-1))
      throw Error(fmt::format("{}: {} must be 1-d with x's last size {}, got shape [{}]", op_name, what, x.size(-1),
                              fmt::join(t->sizes(), ", ")));
  }
  if (p < 0 || p > 1) throw Error(fmt::format("{}: dropout p must be in [0, 1], got {}", op_name, p));
  static auto op = c10::Dispatcher::singleton()
                       .findSchemaOrThrow("slapo::bias_dropout_add_layer_norm", "")
                       .typed<decltype(bias_dropout_add_layer_norm)>();
  return op.call(x, bias, residual, weight, ln_bias, p, training, eps);
}

}  // namespace slapo::kernels
