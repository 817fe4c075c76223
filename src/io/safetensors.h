// safetensors files (https://github.com/huggingface/safetensors format): one file, or shards
// with model.safetensors.index.json, read through mmap with strict bounds checks.
#pragma once

#include <map>
#include <set>
#include <memory>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace slapo {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

struct TensorFile {
  NamedTensors tensors;                          ///< in file order (by data offset)
  std::map<std::string, std::string> metadata;   ///< "__metadata__"
};

/// One .safetensors file mapped into memory with its header checked, nothing read yet. view()
/// is a tensor over the mapped bytes (read-only: copy before writing) that keeps the file mapped,
/// so narrowing a view and copying it reads only the slice's pages. Malformed input raises
/// slapo::Error naming the file and the fault (truncated header, offsets past the end, unknown
/// dtype, ...).
class MappedSafetensors {
 public:
  explicit MappedSafetensors(const std::string& path);
  const std::vector<std::string>& names() const;  ///< in file order (by data offset)
  const std::map<std::string, std::string>& metadata() const;  ///< "__metadata__"
  bool contains(const std::string& name) const;
  at::Tensor view(const std::string& name) const;
  /// After copying from view(name): its pages stop counting as this process's resident memory
  /// (they stay cached; a later read maps them again).
  void release(const std::string& name) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

/// Reads every tensor of one .safetensors file (copies of MappedSafetensors' views).
TensorFile read_safetensors(const std::string& path);

/// Writes tensors (contiguous CPU copies) atomically: a temporary file renamed into place.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {}, const char* caller = "save");

/// One file of a checkpoint directory and the tensors to take from it: those its index lists
/// there (as transformers does, the index is the authority), or every tensor of a single file.
struct CheckpointFile {
  std::string path;
  std::set<std::string> listed;  ///< empty: a single-file checkpoint, every tensor
  bool takes(const std::string& name) const { return listed.empty() || listed.count(name) > 0; }
};
/// `dir`/model.safetensors, or every shard listed in `dir`/model.safetensors.index.json (checked
/// to stay inside `dir`).
std::vector<CheckpointFile> checkpoint_files(const std::string& dir);
/// Reads every tensor checkpoint_files(dir) takes.
NamedTensors read_checkpoint_dir(const std::string& dir);

/// Writes `dir`/model.safetensors, or shards of at most `max_shard_bytes` plus the index.
void write_checkpoint_dir(const std::string& dir, const NamedTensors& tensors, int64_t max_shard_bytes = 0);

}  // namespace slapo
