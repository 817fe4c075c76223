// Mapping a checkpoint directory's safetensors files.
#include "io/checkpoint_reader.h"

#include "core/error.h"

namespace slapo {

CheckpointReader::CheckpointReader(const std::string& dir) : dir_(dir) {
  for (auto& file : checkpoint_files(dir)) {
    files_.emplace_back(file.path);
    for (auto& name : files_.back().names())
      if (file.takes(name)) file_of_.emplace(name, files_.size() - 1);
  }
}

NamedTensors CheckpointReader::views() const {
  NamedTensors out;
  for (size_t f = 0; f < files_.size(); ++f)
    for (auto& name : files_[f].names()) {
      auto taken = file_of_.find(name);  // the index's file for it, else not taken
      if (taken != file_of_.end() && taken->second == f) out.emplace_back(name, files_[f].view(name));
    }
  return out;
}

at::Tensor CheckpointReader::view(const std::string& name) const {
  auto found = file_of_.find(name);
  if (found == file_of_.end()) throw Error(fmt::format("from_pretrained: '{}' has no tensor '{}'", dir_, name));
  return files_[found->second].view(name);
}

void CheckpointReader::release(const std::string& name) const {
  auto found = file_of_.find(name);
  if (found != file_of_.end()) files_[found->second].release(name);
}

}  // namespace slapo
