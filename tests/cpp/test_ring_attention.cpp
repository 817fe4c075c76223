// Blockwise causal attention on one rank (ring attention's ring of one) against attention computed
// whole, with packed documents: pieces whose queries and keys share no document are left out and
// pieces of one document are not masked by document, so every way a piece can fall is compared.
#include <doctest/doctest.h>
#include <torch/torch.h>

#include <algorithm>
#include <limits>
#include <string>

#include "distributed/attention_pieces.h"
#include "distributed/ring_attention.h"

using namespace slapo;

namespace {

// Each row's document ids for documents of these lengths, in order.
at::Tensor documents_of(const std::vector<std::vector<int64_t>>& lengths_by_row) {
  std::vector<at::Tensor> rows;
  for (auto& lengths : lengths_by_row) {
    std::vector<int64_t> ids;
    for (size_t d = 0; d < lengths.size(); ++d) ids.insert(ids.end(), lengths[d], static_cast<int64_t>(d));
    rows.push_back(torch::tensor(ids, torch::kLong));
  }
  return torch::stack(rows);
}

// softmax(q k^T scale, hidden: later keys, keys `window` or more back (window > 0) and other
// documents) v, the S x S scores formed whole.
at::Tensor whole_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                           const at::Tensor& documents, int64_t window) {
  const int64_t groups = q.size(1) / k.size(1), seq = q.size(2);
  auto keys = dist::repeat_heads(k, groups), values = dist::repeat_heads(v, groups);
  auto scores = at::matmul(q, keys.transpose(-1, -2)) * scale;
  auto index = torch::arange(seq);
  auto later = index.unsqueeze(0) > index.unsqueeze(1);  // [query, key]
  if (window > 0) later = later.logical_or(index.unsqueeze(0) <= index.unsqueeze(1) - window);
  later = later.view({1, 1, seq, seq});
  auto hidden = later.logical_or((documents.unsqueeze(2) != documents.unsqueeze(1)).unsqueeze(1));  // [B, 1, S, S]
  return at::matmul(at::softmax(scores.masked_fill(hidden, -std::numeric_limits<float>::infinity()), -1), values);
}

void check_against_whole(const at::Tensor& documents, const std::string& what, int64_t window = 0) {
  INFO(what);
  torch::manual_seed(5);
  const int64_t seq = documents.size(1);
  auto q = torch::randn({2, 4, seq, 8}, torch::requires_grad());
  auto k = torch::randn({2, 2, seq, 8}, torch::requires_grad());
  auto v = torch::randn({2, 2, seq, 8}, torch::requires_grad());
  auto dout = torch::randn({2, 4, seq, 8});
  // 8 query rows at a time (4 heads x 2 rows x 8 x 4 bytes a key): many pieces in one sequence
  auto blockwise =
      dist::blockwise_causal_attention(q, k, v, torch::arange(seq), 0.35, 2 * 4 * 8 * 4 * 8, window, documents);
  auto grads = torch::autograd::grad({blockwise}, {q, k, v}, {dout});
  auto whole = whole_attention(q, k, v, 0.35, documents, window);
  auto expected = torch::autograd::grad({whole}, {q, k, v}, {dout});
  CHECK(torch::allclose(blockwise, whole, 1e-5, 1e-5));
  for (size_t i = 0; i < 3; ++i) CHECK(torch::allclose(grads[i], expected[i], 1e-4, 1e-5));
}

}  // namespace

TEST_CASE("blockwise attention keeps packed documents apart as attention computed whole does") {
  // documents ending inside a chunk of 8 rows and on its edge, long and short ones, a row of one
  check_against_whole(documents_of({{5, 19, 16, 24}, {64}}), "cut inside and on the chunks' edges");
  check_against_whole(documents_of({{2, 2, 2, 2, 8, 8, 40}, {32, 32}}), "short documents, a row in halves");
  // ids that do not rise along the row are read element by element (every piece masked)
  auto alternating = documents_of({{64}, {64}});
  alternating.select(0, 0).copy_(torch::arange(64) % 2);
  check_against_whole(alternating, "ids that do not rise along the row");
  // a sliding window of 12 (Mistral's) over the same documents
  check_against_whole(documents_of({{5, 19, 16, 24}, {64}}), "window 12", 12);
}

TEST_CASE("attention pieces: those the causal mask, a window or the documents hide wholly are left out") {
  // 64 tokens in one run, pieces of 8 queries x 8 keys
  auto run = dist::runs_of(torch::arange(64));
  REQUIRE(run.size() == 1);
  auto count = [&](int64_t window, const at::Tensor& documents, int* by_document = nullptr) {
    auto pieces = dist::pieces_of(run, run, 8, window, dist::DocumentSpans(documents));
    if (by_document) *by_document = static_cast<int>(std::count_if(pieces.begin(), pieces.end(),
                                                                    [](const dist::Piece& p) { return p.documents; }));
    return pieces.size();
  };
  int masked_by_document = -1;
  CHECK(count(0, at::Tensor(), &masked_by_document) == 36);  // 1 + 2 + .. + 8: the causal triangle's
  CHECK(masked_by_document == 0);
  // documents of 8 on the pieces' edges: the diagonal's 8 alone, none masked by document
  std::vector<std::vector<int64_t>> eights(1, std::vector<int64_t>(8, 8));
  CHECK(count(0, documents_of(eights), &masked_by_document) == 8);
  CHECK(masked_by_document == 0);
  // two documents of 32 in one row, one of 64 in the other: the other row's keys keep every piece
  CHECK(count(0, documents_of({{32, 32}, {64}}), &masked_by_document) == 36);
  CHECK(masked_by_document == 16);  // the pieces of the first row's second half that reach into its first
  // the same two documents in both rows: each half its own triangle, 2 x (1 + 2 + 3 + 4)
  CHECK(count(0, documents_of({{32, 32}, {32, 32}}), &masked_by_document) == 20);
  CHECK(masked_by_document == 0);
  // a cut inside a piece: that piece and the ones across the cut masked by document
  CHECK(count(0, documents_of({{12, 52}}), &masked_by_document) == 36 - 1 * 6);
  CHECK(masked_by_document == 2 + 6);  // the cut chunk against itself and the one before; every later one against it
  // a window of 16: the pieces at most 2 back, whose keys some query still sees
  CHECK(count(16, at::Tensor()) == 8 + 7 + 6);
  // ids that do not rise along the row: every piece kept and masked by document
  auto alternating = (torch::arange(64) % 2).reshape({1, 64});
  CHECK(count(0, alternating, &masked_by_document) == 36);
  CHECK(masked_by_document == 36);
}
