// Mapping a checkpoint directory's safetensors files.
#include "io/checkpoint_reader.h"

#include "core/error.h"

namespace slapo {

CheckpointReader::CheckpointReader(const std::string& dir) : dir_(dir) {
  for (auto& path : checkpoint_files(dir)) {
    files_.emplace_back(path);
    for (auto& name : files_.back().names()) file_of_.emplace(name, files_.size() - 1);
  }
}

NamedTensors CheckpointReader::views() const {
  NamedTensors out;
  for (auto& file : files_)
    for (auto& name : file.names()) out.emplace_back(name, file.view(name));
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
