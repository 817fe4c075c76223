// Memory mapped on its own for large short-lived buffers, the ledger that counts fully_shard's, and
// the tensor meter that sees both.
#include <torch/torch.h>
#include <doctest/doctest.h>

#include <cstdint>

#include "core/mapped_memory.h"
#include "core/memory_ledger.h"
#include "train/tensor_memory.h"

using namespace slapo;

namespace {
constexpr int64_t kMiB = int64_t(1) << 20;
bool on_huge_page_boundary(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % (2 * kMiB) == 0; }
}  // namespace

TEST_CASE("mapped memory: large CPU buffers get a mapping of their own, on a huge page boundary") {
  at::Tensor big = empty_mapped({3 * kMiB / 4}, at::kFloat);  // 3 MiB
  CHECK(big.nbytes() == size_t(3 * kMiB));
  CHECK(on_huge_page_boundary(big));
  big.fill_(2.5);
  CHECK(big.sum().item<double>() == doctest::Approx(2.5 * big.numel()));
  CHECK_THROWS(big.resize_({4 * kMiB}));  // fixed-size storage: no silent reallocation on the heap
  // below the bound: the CPU allocator's, resizable as any tensor
  at::Tensor small = empty_mapped({16}, at::kFloat);
  small.resize_({32});
  CHECK(small.numel() == 32);
}

TEST_CASE("mapped memory: the tensor meter counts a mapping from allocation to free") {
  TensorBytes bytes = tensor_bytes([] {
    at::Tensor held = empty_mapped({kMiB}, at::kFloat);  // 4 MiB, freed at the end of the call
    held.zero_();
  });
  CHECK(bytes.peak >= 4 * kMiB);
  CHECK(bytes.held == 0);
  // one allocated before the meter listened and freed while it does is not taken off what it saw
  at::Tensor before = empty_mapped({kMiB}, at::kFloat);
  TensorBytes freed = tensor_bytes([&] {
    before = at::Tensor();
    at::Tensor small = at::ones({16});
  });
  CHECK(freed.held >= 0);
  CHECK(freed.peak >= 64);
}

TEST_CASE("memory ledger: a counted buffer counts as gathered until freed, mapped or not") {
  const int64_t before = held_bytes(Held::Gathered);
  {
    at::Tensor whole = empty_counted({2 * kMiB}, at::TensorOptions(at::kFloat), Held::Gathered);  // 8 MiB, mapped
    at::Tensor small = empty_counted({64}, at::TensorOptions(at::kFloat), Held::Gathered);
    CHECK(held_bytes(Held::Gathered) - before == 8 * kMiB + 256);
    CHECK(on_huge_page_boundary(whole));
  }
  CHECK(held_bytes(Held::Gathered) == before);
}
