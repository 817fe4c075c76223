// A checkpoint directory's tensors mapped, not read: from_pretrained on the meta device keeps one,
// and build reads each rank's slices from it.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "io/safetensors.h"

namespace slapo {

class CheckpointReader {
 public:
  /// Maps `dir`/model.safetensors, or the shards its index names.
  explicit CheckpointReader(const std::string& dir);

  const std::string& dir() const { return dir_; }
  /// Every tensor, in file order, as views of the mapped files (nothing read yet).
  NamedTensors views() const;
  bool contains(const std::string& name) const { return file_of_.count(name) > 0; }
  /// The tensor `name` as a view of its file; narrowing and copying it reads only those pages.
  at::Tensor view(const std::string& name) const;
  /// After copying from view(name): its pages leave this process's resident memory.
  void release(const std::string& name) const;

 private:
  std::string dir_;
  std::vector<MappedSafetensors> files_;
  std::map<std::string, size_t> file_of_;
};

}  // namespace slapo
