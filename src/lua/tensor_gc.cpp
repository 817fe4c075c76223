#include "lua/tensor_gc.h"

#include <ATen/core/Tensor.h>

#include <algorithm>
#include <chrono>
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
  int64_t graphs = 0;  // boxes with a grad_fn pushed since the last collection
  double last_seconds = 0;
  std::chrono::steady_clock::time_point last_end = std::chrono::steady_clock::now();
};

Pressure& pressure() {
  static Pressure p;
  return p;
}

// A full collection; collected boxes release their charge from __gc, so `boxed` afterwards is what
// survived, and the next threshold is twice that.
void collect(lua_State* L) {
  auto& p = pressure();
  auto start = std::chrono::steady_clock::now();
  lua_gc(L, LUA_GCCOLLECT, 0);
  p.last_end = std::chrono::steady_clock::now();
  p.last_seconds = std::chrono::duration<double>(p.last_end - start).count();
  ++p.collections;
  p.graphs = 0;
  p.threshold = std::max(p.floor, 2 * p.boxed);
}

}  // namespace

int64_t tensor_gc_charge(const at::Tensor& t) {
  if (!t.defined() || !t.has_storage() || t.device().is_meta()) return 0;
  return static_cast<int64_t>(t.storage().nbytes());
}

void tensor_gc_charge_push(lua_State* L, int64_t bytes, bool graph) {
  auto& p = pressure();
  p.boxed += bytes;
  if (graph) ++p.graphs;
  if (p.boxed > p.threshold) collect(L);
}

void tensor_gc_after_backward(lua_State* L) {
  auto& p = pressure();
  if (p.graphs == 0) return;
  double since = std::chrono::duration<double>(std::chrono::steady_clock::now() - p.last_end).count();
  if (since < 20 * p.last_seconds) return;  // at most ~5% of the time in these collections
  collect(L);
}

void tensor_gc_release(int64_t bytes) { pressure().boxed -= bytes; }

TensorGcStats tensor_gc_stats() {
  auto& p = pressure();
  return {p.boxed, p.threshold, p.floor, p.collections, p.last_seconds};
}

}  // namespace slapo
