// Tensor memory as pressure on Lua's collector. Lua sees a boxed tensor as a few bytes of
// userdata while the storage behind it can hold hundreds of megabytes, so without help the
// collector runs too rarely and every step's garbage tensors pile up. Each box is charged its
// storage's bytes; when the bytes charged to live boxes pass a threshold, a full collection runs
// and the threshold becomes twice what survived it (Lua's own pause rule, applied to tensor bytes;
// Torch7 let its allocator drive the collector for the same reason).
#pragma once

#include <lua.hpp>

#include <cstdint>

namespace at {
class Tensor;
}

namespace slapo {

/// The bytes a box of `t` is charged: its storage's, or 0 for undefined and meta tensors.
int64_t tensor_gc_charge(const at::Tensor& t);

/// A box of `bytes` was pushed on L; may run a full collection first (call before creating it).
void tensor_gc_charge_push(lua_State* L, int64_t bytes);

/// A box charged `bytes` was collected.
void tensor_gc_release(int64_t bytes);

struct TensorGcStats {
  int64_t boxed_bytes;      // charged to boxes not yet collected
  int64_t threshold_bytes;  // the next full collection runs above this
  int64_t floor_bytes;      // the least threshold (SLAPO_TENSOR_GC_MIB, default 64)
  int64_t collections;      // full collections run for tensor memory
};
TensorGcStats tensor_gc_stats();

}  // namespace slapo
