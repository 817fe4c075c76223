// Rotary position embedding on CPU (rotate-half convention): out = x*cos + rotate_half(x)*sin.
// The rotation is orthogonal, so its backward is the rotation by -theta (inverse = true).
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>

#include "core/error.h"
#include "cpu/cpu_kernels.h"

namespace slapo::kernels::cpu {

at::Tensor rope_apply(const at::Tensor& x_in, const at::Tensor& cos_in, const at::Tensor& sin_in, bool inverse) {
  if (x_in.dim() != 4 || cos_in.dim() != 3 || x_in.size(-1) % 2 != 0)
    throw Error(fmt::format("rope: expected x [B, H, S, D] with even D and cos/sin [B, S, D], got [{}] and [{}]",
                            fmt::join(x_in.sizes(), ", "), fmt::join(cos_in.sizes(), ", ")));
  auto x = x_in.contiguous();
  auto cos = cos_in.expand({x.size(0), x.size(2), x.size(3)}).contiguous();
  auto sin = sin_in.expand({x.size(0), x.size(2), x.size(3)}).contiguous();
  auto y = at::empty_like(x);
  const int64_t B = x.size(0), H = x.size(1), S = x.size(2), D = x.size(3), half = D / 2;
  AT_DISPATCH_FLOATING_TYPES(x.scalar_type(), "rope", [&] {
    const scalar_t* xp = x.data_ptr<scalar_t>();
    const scalar_t* cp = cos.data_ptr<scalar_t>();
    const scalar_t* sp = sin.data_ptr<scalar_t>();
    scalar_t* yp = y.data_ptr<scalar_t>();
    const scalar_t sign = inverse ? scalar_t(-1) : scalar_t(1);
    at::parallel_for(0, B * H * S, 16, [&](int64_t begin, int64_t end) {
      for (int64_t row = begin; row < end; ++row) {
        const int64_t b = row / (H * S), s = row % S;
        const scalar_t* in = xp + row * D;
        const scalar_t* c = cp + (b * S + s) * D;
        const scalar_t* sn = sp + (b * S + s) * D;
        scalar_t* out = yp + row * D;
        for (int64_t i = 0; i < half; ++i) {
          // rotate_half(x) = [-x2, x1]
          out[i] = in[i] * c[i] - sign * in[i + half] * sn[i];
          out[i + half] = in[i + half] * c[i + half] + sign * in[i] * sn[i + half];
        }
      }
    });
  });
  return y;
}

}  // namespace slapo::kernels::cpu
