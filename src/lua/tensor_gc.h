// Tensor memory as pressure on Lua's collector. Lua sees a boxed tensor as a few bytes of
// userdata while the storage behind it can hold hundreds of megabytes, so without help the
// collector runs too rarely and every step's garbage tensors pile up. Each box is charged its
// storage's bytes; when the bytes charged to live boxes pass a threshold, a full collection runs
// and the threshold becomes twice what survived it (Lua's own pause rule, applied to tensor bytes;
// Torch7 let its allocator drive the collector for the same reason). A backward pass is a second
// moment to collect: see tensor_gc_after_backward.
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
/// `graph`: the tensor carries an autograd graph (a grad_fn).
void tensor_gc_charge_push(lua_State* L, int64_t bytes, bool graph);

/// After a backward pass: the graphs of earlier steps' unreachable results (a loss holds its
/// whole graph's nodes, small but interleaved with the big buffers, so the heap fragments) are
/// collected now, as Python's reference counting would, unless collections have taken more than
/// 1/20 of the time since the last one (a large Lua heap).
void tensor_gc_after_backward(lua_State* L);

/// A box charged `bytes` was collected.
void tensor_gc_release(int64_t bytes);

struct TensorGcStats {
  int64_t boxed_bytes;      // charged to boxes not yet collected
  int64_t threshold_bytes;  // the next full collection runs above this
  int64_t floor_bytes;      // the least threshold (SLAPO_TENSOR_GC_MIB, default 64)
  int64_t collections;      // full collections run for tensor memory or after backward
  double collect_seconds;   // the time the last one took
};
TensorGcStats tensor_gc_stats();

}  // namespace slapo
