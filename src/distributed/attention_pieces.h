// How blockwise causal attention cuts its work (ring attention's steps, Ulysses' whole sequence):
// pieces of queries against keys, those that the causal mask, a sliding window or packed documents
// hide wholly left out, and each kept piece told which masks it needs. Decided on the host.
#pragma once

#include <torch/torch.h>

#include <vector>

namespace slapo::dist {

/// A run of a rank's tokens at consecutive positions: rows start .. start + length - 1 of its
/// block, at positions first .. first + length - 1 (a load-balanced rank has two, a contiguous one one).
struct Run {
  int64_t start, length, first;
};

/// The runs of a rank's token positions [s] (int64, on the host).
std::vector<Run> runs_of(const at::Tensor& host_positions);

/// Packed documents' ids by global index [B, S], read on the host once a call: which documents a
/// span of positions holds, in each row. Ids that rise along a row (as position_ids' starts counted
/// give them) make a span's documents those from its first position's to its last's; other ids are
/// not read this way (every piece is then masked by document).
class DocumentSpans {
 public:
  enum class Shared { kNone, kOneDocument, kSome };
  /// Undefined `documents`: no documents (every span is one).
  explicit DocumentSpans(const at::Tensor& documents);
  /// What the queries at positions q_first .. q_last and the keys at k_first .. k_last have in
  /// common, over every row: no document, one document each row and nothing else, or some.
  Shared between(int64_t q_first, int64_t q_last, int64_t k_first, int64_t k_last) const;

 private:
  at::Tensor host_;
  bool sorted_ = false;
};

/// One piece of work: `length` query rows from `row` (at positions from `first`) against the keys
/// of `keys`, a part of one run.
struct Piece {
  int64_t row, length, first;
  Run keys;
  bool masked;     ///< by position: the causal diagonal or the window's edge
  bool documents;  ///< by document: its queries and keys are not all of one document
};

/// The pieces of `queries` against `key_runs`, up to `side` query rows against up to `side` keys
/// each. Pieces whose every key comes after every query (or, with a sliding window, lies at or
/// beyond `window` positions before every query, or in other documents than every query's) are
/// left out. Every row keeps its own position among some piece's keys; a row of a piece may be all
/// masked.
std::vector<Piece> pieces_of(const std::vector<Run>& queries, const std::vector<Run>& key_runs, int64_t side,
                             int64_t window, const DocumentSpans& documents);

/// The side of a piece for queries [B, H, ...]: at most `score_bytes` of float32 scores a piece,
/// so a rank's transient memory does not grow with the square of its share of the sequence. Square
/// pieces leave out the most work the causal mask and the documents hide.
int64_t piece_side(const at::Tensor& q, int64_t score_bytes);

}  // namespace slapo::dist
