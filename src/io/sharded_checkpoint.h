// Training checkpoints in pieces that reshard: each rank writes the slices it holds with the
// place of each in the whole tensor, one index lists them all, and a run on another layout (other
// ranks, tensor-parallel or fully sharded) reads just the parts of the pieces its own slices
// overlap. In the spirit of torch.distributed.checkpoint; the files are safetensors and JSON.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/module.h"
#include "io/safetensors.h"

namespace slapo {

/// One block of a rank's tensor: where it starts in that tensor (`at`), where in the whole tensor
/// (`offsets`), and its sizes. A slice of a fused tensor (shard's `groups`) is several blocks.
struct Box {
  std::vector<int64_t> at, offsets, sizes;
};

/// Where a rank's tensor sits in the whole one.
struct Placement {
  std::vector<int64_t> shape;  ///< the whole tensor's
  std::vector<Box> boxes;      ///< none where this rank's slice is empty
  std::vector<int64_t> local;  ///< this rank's slice's shape

  const std::vector<int64_t>& local_shape() const { return local; }
};

/// The placement of a tensor split by `splits` (outermost first) whose whole shape is
/// `whole_shape` (used when there are no splits).
Placement placement_of(const Splits& splits, const std::vector<int64_t>& whole_shape);

/// Writes this rank's `tensors` of `model` to the safetensors file `path`, one entry per block,
/// and the list of pieces (name, entry, offsets, sizes, whole shape) into its metadata. The names
/// are the model's state (parameters and buffers) or an optimizer's, named after a parameter
/// ("P.exp_avg": placed as P); others ("P.step") are whole on every rank.
void write_pieces(const Module& model, const std::string& path, const NamedTensors& tensors);

/// Merges the piece lists of `files` (names inside `dir`) into `dir`/index.json.
void write_piece_index(const std::string& dir, const std::vector<std::string>& files);

/// A checkpoint directory's index.json, its files mapped as they are needed.
class ShardedCheckpoint {
 public:
  explicit ShardedCheckpoint(const std::string& dir);

  /// Every tensor of `section` ("model" for model-rank*.safetensors, "optimizer", ...) as this
  /// rank's slice for `model`'s layout, read from the overlapping parts of the pieces. Raises,
  /// naming the tensor, when the pieces do not cover it or its whole shape differs from the
  /// model's; for the "model" section also when the model has state the index lacks. `only`, when
  /// given: the names of the tensors this rank holds (a pipeline stage's), and the tensors read are
  /// those and the ones named after them ("P.exp_avg" for P).
  NamedTensors read(const std::string& section, const Module& model, const std::vector<std::string>& only = {}) const;

  const std::string& dir() const { return dir_; }

 private:
  struct Piece {
    std::string file, entry;
    std::vector<int64_t> offsets, sizes;
  };
  struct Entry {
    std::vector<int64_t> shape;
    std::vector<Piece> pieces;
  };
  at::Tensor read_one(const std::string& name, const Entry& entry, const Placement& where) const;
  const MappedSafetensors& file(const std::string& name) const;

  std::string dir_;
  std::map<std::string, std::map<std::string, Entry>> sections_;  ///< section -> tensor -> pieces
  mutable std::map<std::string, std::unique_ptr<MappedSafetensors>> files_;
};

}  // namespace slapo
