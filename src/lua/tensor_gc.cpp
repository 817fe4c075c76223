#include "lua/tensor_gc.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <cstdlib>

namespace slapo {

namespace {

int64_t floor_from_env() {
  const char* mib = std::getenv("SLAPO_TENSOR_GC_MIB");
  double value = mib ? std::atof(mib) : 64.0;
  return static_cast<int64_t>(std::max(value, 1.0) * (1 << 20));
}

struct Pressure {
  int64_t floor = floor_from_env();
  int64_t boxed = 0;
  int64_t threshold = floor;
  int64_t collections = 0;
};

Pressure& pressure() {
  static Pressure p;
  return p;
}

}  // namespace

int64_t tensor_gc_charge(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage() || t.device().is_meta()) return 0;
  return static_cast<int64_t>(t.storage().nbytes());
}

void tensor_gc_charge_push(lua_State* L, int64_t bytes) {
  auto& p = pressure();
  p.boxed += bytes;
  if (p.boxed <= p.threshold) return;
  // Collected boxes release their charge from __gc, so `boxed` afterwards is what survived.
  lua_gc(L, LUA_GCCOLLECT, 0);
  ++p.collections;
  p.threshold = std::max(p.floor, 2 * p.boxed);
}

void tensor_gc_release(int64_t bytes) { pressure().boxed -= bytes; }

TensorGcStats tensor_gc_stats() {
  auto& p = pressure();
  return {p.boxed, p.threshold, p.floor, p.collections};
}

}  // namespace slapo
