// safetensors files (https://github.com/huggingface/safetensors format): one file, or shards
// with model.safetensors.index.json, read through mmap with strict bounds checks.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <torch/torch.h>

namespace slapo {

using NamedTensors = std::vector<std::pair<std::string, at::Tensor>>;

struct TensorFile {
  NamedTensors tensors;                          ///< in file order (by data offset)
  std::map<std::string, std::string> metadata;   ///< "__metadata__"
};

/// Reads every tensor of one .safetensors file. Malformed input raises slapo::Error naming the
/// file and the fault (truncated header, offsets past the end, unknown dtype, ...).
TensorFile read_safetensors(const std::string& path);

/// Writes tensors (contiguous CPU copies) atomically: a temporary file renamed into place.
void write_safetensors(const std::string& path, const NamedTensors& tensors,
                       const std::map<std::string, std::string>& metadata = {});

/// Reads `dir`/model.safetensors, or every shard listed in `dir`/model.safetensors.index.json.
NamedTensors read_checkpoint_dir(const std::string& dir);

/// Writes `dir`/model.safetensors, or shards of at most `max_shard_bytes` plus the index.
void write_checkpoint_dir(const std::string& dir, const NamedTensors& tensors, int64_t max_shard_bytes = 0);

}  // namespace slapo
