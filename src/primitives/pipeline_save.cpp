// slapo.save of a pipeline: each stage's parameters gathered over its tensor-parallel group, then
// stage by stage over the pipeline group onto its first rank, and one rank writes the checkpoint.
#include <set>

#include "core/error.h"
#include "distributed/group.h"
#include "io/pretrained.h"
#include "primitives/pipeline.h"

namespace slapo {

namespace {

// Broadcasts `from`'s named tensors to the whole group: a name list, a shape header, then each
// tensor. Every rank of the group calls it; the others pass nothing and get `from`'s.
NamedTensors broadcast_named(dist::Group& group, int from, const NamedTensors& mine) {
  const bool sender = group.rank() == from;
  std::string names;
  std::vector<int64_t> header;  // per tensor: dtype, ndim, sizes
  if (sender)
    for (auto& [name, t] : mine) {
      names += name + '\n';
      header.push_back(static_cast<int64_t>(t.scalar_type()));
      header.push_back(t.dim());
      for (auto d : t.sizes()) header.push_back(d);
    }
  auto lengths = torch::tensor({static_cast<int64_t>(names.size()), static_cast<int64_t>(header.size())});
  group.broadcast(lengths, from, "save");
  auto name_bytes = sender ? torch::from_blob(names.data(), {static_cast<int64_t>(names.size())}, torch::kUInt8).clone()
                           : torch::empty({lengths[0].item<int64_t>()}, torch::kUInt8);
  auto header_t = sender ? torch::tensor(header, torch::kInt64) : torch::empty({lengths[1].item<int64_t>()}, torch::kInt64);
  group.broadcast(name_bytes, from, "save");
  group.broadcast(header_t, from, "save");

  std::string all(reinterpret_cast<const char*>(name_bytes.data_ptr<uint8_t>()), name_bytes.numel());
  const int64_t* h = header_t.data_ptr<int64_t>();
  NamedTensors out;
  size_t start = 0, i = 0;
  for (size_t end = all.find('\n'); end != std::string::npos; start = end + 1, end = all.find('\n', start), ++i) {
    auto dtype = static_cast<at::ScalarType>(*h++);
    int64_t ndim = *h++;
    std::vector<int64_t> sizes(h, h + ndim);
    h += ndim;
    at::Tensor t = sender ? mine[i].second.contiguous() : torch::empty(sizes, torch::TensorOptions().dtype(dtype));
    group.broadcast(t, from, "save");
    out.emplace_back(all.substr(start, end - start), t);
  }
  return out;
}

}  // namespace

void save_pipeline(Pipeline& pipe, const std::string& dir, int64_t max_shard_bytes) {
  auto& sch = pipe.schedule();
  auto mine = gather_shards(sch, pipe.named_parameters(), "save");
  for (auto& [name, t] : mine) t = t.cpu();  // the header protocol and the file are on the host
  auto& group = *pipe.runner().group();
  NamedTensors full;
  std::set<std::string> seen;  // a parameter several stages use (tied weights) is written once
  auto& meshes = pipe.runner().meshes();  // stages on meshes: each stage's first rank sends
  for (int s = 0; s < pipe.stages(); ++s)
    for (auto& [name, t] : broadcast_named(group, meshes.empty() ? s : meshes[s].first_rank, mine))
      if (seen.insert(name).second) full.emplace_back(name, t);
  if (elected_writer(group.rank() == 0 && sch.group()->rank() == 0, "save"))
    write_pretrained(*sch.mod(), dir, full, max_shard_bytes);
}

}  // namespace slapo
