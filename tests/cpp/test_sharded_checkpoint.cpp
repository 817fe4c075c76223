// Where a rank's slice sits in the whole tensor (io/sharded_checkpoint.h), checked against the
// slices shard and fully_shard actually keep: every block's elements are the whole tensor's at
// the block's offsets.
#include <torch/torch.h>
#include <doctest/doctest.h>

#include "distributed/split_tensors.h"
#include "io/sharded_checkpoint.h"

using namespace slapo;

namespace {

// Raises unless the placement's blocks tile `local` with the whole tensor's values at their offsets.
void check_placement(const Placement& where, const at::Tensor& whole, const at::Tensor& local) {
  REQUIRE(where.local_shape() == local.sizes().vec());
  int64_t covered = 0;
  for (const Box& b : where.boxes) {
    at::Tensor mine = local, theirs = whole;
    for (size_t d = 0; d < b.sizes.size(); ++d) {
      mine = mine.narrow(static_cast<int64_t>(d), b.at[d], b.sizes[d]);
      theirs = theirs.narrow(static_cast<int64_t>(d), b.offsets[d], b.sizes[d]);
    }
    CHECK(mine.equal(theirs));
    covered += mine.numel();
  }
  CHECK(covered == local.numel());
}

}  // namespace

TEST_CASE("sharded checkpoint: a fused column-parallel slice is one block per section") {
  at::Tensor whole = torch::arange(8 * 12).reshape({8, 12});
  for (int rank = 0; rank < 2; ++rank) {
    ShardSpec tp{1, {8, 12}, 2, rank, 3, 0};  // q, k, v of 4 columns each, halved
    Placement where = placement_of({&tp}, {});
    CHECK(where.shape == std::vector<int64_t>{8, 12});
    REQUIRE(where.boxes.size() == 3);
    CHECK(where.boxes[1].offsets == std::vector<int64_t>{0, 4 + 2 * rank});
    CHECK(where.boxes[1].at == std::vector<int64_t>{0, 2});
    check_placement(where, whole, local_part({&tp}, whole));
  }
}

TEST_CASE("sharded checkpoint: 2-D, fully_shard's rows of shard's slice, across fused sections too") {
  at::Tensor whole = torch::arange(12 * 6).reshape({12, 6});
  for (int tp_rank = 0; tp_rank < 2; ++tp_rank)
    for (int dp_rank = 0; dp_rank < 2; ++dp_rank) {
      // shard along rows in 3 sections (each 4 rows, halved: 2 a rank), then fully_shard's halves
      // of the 6 rows that leaves: the second half straddles two sections
      ShardSpec tp{0, {12, 6}, 2, tp_rank, 3, 1};
      ShardSpec dp{0, {6, 6}, 2, dp_rank, 1, 2};
      Placement where = placement_of({&tp, &dp}, {});
      check_placement(where, whole, local_part({&tp, &dp}, whole));
      CHECK(where.boxes.size() == 2);
    }
  ShardSpec column{1, {12, 6}, 3, 1, 1, 1}, rows{0, {12, 2}, 4, 3, 1, 2};
  Placement where = placement_of({&column, &rows}, {});
  REQUIRE(where.boxes.size() == 1);
  CHECK(where.boxes[0].offsets == std::vector<int64_t>{9, 2});
  check_placement(where, whole, local_part({&column, &rows}, whole));
}

TEST_CASE("sharded checkpoint: a whole tensor, and a scalar, is one block") {
  Placement where = placement_of({}, {3, 5});
  REQUIRE(where.boxes.size() == 1);
  CHECK(where.boxes[0].sizes == std::vector<int64_t>{3, 5});
  Placement scalar = placement_of({}, {});
  REQUIRE(scalar.boxes.size() == 1);
  CHECK(scalar.local_shape().empty());
}

TEST_CASE("sharded checkpoint: rows a group does not divide, split as torch.chunk, the last rank holding none") {
  at::Tensor whole = torch::arange(5 * 3).reshape({5, 3});
  const std::vector<int64_t> rows_of_rank{2, 2, 1, 0};  // ceil(5 / 4) rows a rank, the rest to the last ones
  for (int rank = 0; rank < 4; ++rank) {
    ShardSpec dp{0, {5, 3}, 4, rank, 1, 2};
    at::Tensor local = local_part({&dp}, whole);
    CHECK(local.size(0) == rows_of_rank[rank]);
    Placement where = placement_of({&dp}, {});
    if (rows_of_rank[rank] == 0) {
      CHECK(where.boxes.empty());
      continue;
    }
    REQUIRE(where.boxes.size() == 1);
    CHECK(where.boxes[0].offsets == std::vector<int64_t>{2 * rank, 0});
    check_placement(where, whole, local);
  }
}
