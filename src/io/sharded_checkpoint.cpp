// Training checkpoints in pieces that reshard (see sharded_checkpoint.h).
#include "io/sharded_checkpoint.h"

#include <algorithm>
#include <filesystem>
#include <functional>
#include <set>

#include "core/error.h"
#include "core/expert_groups.h"
#include "io/atomic_file.h"
#include "io/json_file.h"

namespace slapo {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

const char* const kPiecesKey = "slapo.pieces";  // a file's metadata: the pieces it holds

// A parameter or buffer of the model: how it is split, and its shape on this rank.
struct StateTensor {
  Splits splits;
  std::vector<int64_t> shape;
};
using StateMap = std::map<std::string, StateTensor>;

// Every parameter and buffer of `root` by state-dict name (ties under each name). A parameter's
// splits are found by tensor: a tie split under one of its names (GPT-2's lm_head.weight, split
// as transformer.wte.weight) is split under all.
StateMap state_by_name(const Module& root) {
  StateMap out;
  const auto by_tensor = splits_by_tensor(root);
  std::function<void(const Module&, const std::string&)> visit = [&](const Module& m, const std::string& path) {
    const std::string prefix = path.empty() ? "" : path + ".";
    for (auto& p : m.named_parameters(/*recurse=*/false)) {
      if (!p.value().defined()) continue;
      auto found = by_tensor.find(p.value().unsafeGetTensorImpl());
      out[prefix + p.key()] = {found == by_tensor.end() ? Splits{} : found->second, p.value().sizes().vec()};
    }
    for (auto& b : m.named_buffers(/*recurse=*/false))
      if (b.value().defined()) out[prefix + b.key()] = {splits_of(m, b.key()), b.value().sizes().vec()};
    for (auto& [name, child] : m.children_in_order()) visit(*child, prefix + name);
  };
  visit(root, "");
  return out;
}

// The model tensor a name is placed as: itself, or the parameter an optimizer tensor is named
// after ("P.exp_avg" -> P); nullptr for neither (whole on every rank).
const StateTensor* owner_of(const StateMap& state, const std::string& name) {
  if (auto it = state.find(name); it != state.end()) return &it->second;
  auto dot = name.rfind('.');
  if (dot == std::string::npos) return nullptr;
  auto it = state.find(name.substr(0, dot));
  return it == state.end() ? nullptr : &it->second;
}

// The whole shape of a model tensor: its outermost split's, or its own when whole.
std::vector<int64_t> whole_shape(const StateTensor& owner) {
  return owner.splits.empty() ? owner.shape : owner.splits[0]->full_shape;
}

std::string section_of(const std::string& file) { return file.substr(0, file.find("-rank")); }

std::string shape_text(const std::vector<int64_t>& shape) { return fmt::format("[{}]", fmt::join(shape, ", ")); }

}  // namespace

Placement placement_of(const Splits& splits, const std::vector<int64_t>& whole_shape) {
  Placement p;
  p.shape = splits.empty() ? whole_shape : splits[0]->full_shape;
  std::vector<int64_t> zeros(p.shape.size(), 0);
  p.boxes.push_back({zeros, zeros, p.shape});
  p.local = p.shape;
  // Each split keeps, of the tensor so far, part `rank` of each of its `groups` sections along
  // `axis`, concatenated: a window per section, whose overlap with each block is a block of the
  // new local tensor.
  for (const ShardSpec* spec : splits) {
    const int64_t a = spec->axis, section = spec->full_shape[a] / spec->groups, part = spec->part_size(spec->rank);
    std::vector<Box> next;
    for (int g = 0; g < spec->groups; ++g) {
      const int64_t lo = g * section + spec->rank * spec->part_stride(), hi = lo + part;
      for (const Box& b : p.boxes) {
        int64_t start = std::max(lo, b.at[a]), end = std::min(hi, b.at[a] + b.sizes[a]);
        if (start >= end) continue;
        Box n = b;
        n.offsets[a] = b.offsets[a] + (start - b.at[a]);
        n.sizes[a] = end - start;
        n.at[a] = g * part + (start - lo);
        next.push_back(std::move(n));
      }
    }
    p.boxes = std::move(next);
    p.local[a] = spec->groups * part;
  }
  return p;
}

void write_pieces(const Module& model, const std::string& path, const NamedTensors& tensors) {
  auto state = state_by_name(model);
  NamedTensors entries;
  json pieces = json::array();
  for (auto& [name, t] : tensors) {
    const auto* owner = t.dim() == 0 ? nullptr : owner_of(state, name);  // a scalar ("P.step") is whole
    Placement where = placement_of(owner ? owner->splits : Splits{}, t.sizes().vec());
    if (owner && where.local_shape() != t.sizes().vec())  // ZeRO's flat slices, say: not the parameter's layout
      throw Error(fmt::format("checkpoint: '{}' is {} on this rank, where its parameter's slice is {}; only "
                              "tensors shaped as their parameters can be saved in pieces",
                              name, shape_text(t.sizes().vec()), shape_text(where.local_shape())));
    for (size_t i = 0; i < where.boxes.size(); ++i) {
      const Box& b = where.boxes[i];
      at::Tensor block = t.detach();
      for (size_t d = 0; d < b.at.size(); ++d) block = block.narrow(static_cast<int64_t>(d), b.at[d], b.sizes[d]);
      std::string entry = where.boxes.size() == 1 && block.sizes() == t.sizes() ? name : fmt::format("{}#{}", name, i);
      entries.emplace_back(entry, block);
      pieces.push_back({{"name", name}, {"entry", entry}, {"offsets", b.offsets}, {"sizes", b.sizes},
                        {"shape", where.shape}});
    }
  }
  write_safetensors(path, entries, {{kPiecesKey, pieces.dump()}}, "checkpoint");
}

void write_piece_index(const std::string& dir, const std::vector<std::string>& files) {
  json sections = json::object();
  for (auto& file : files) {
    MappedSafetensors mapped((fs::path(dir) / file).string());
    auto found = mapped.metadata().find(kPiecesKey);
    if (found == mapped.metadata().end())
      throw Error(fmt::format("checkpoint: '{}' in '{}' lists no pieces", file, dir));
    for (auto& piece : json::parse(found->second)) {
      json& entry = sections[section_of(file)][piece["name"].get<std::string>()];
      if (entry.is_null()) entry = {{"shape", piece["shape"]}, {"pieces", json::array()}};
      if (entry["shape"] != piece["shape"])
        throw Error(fmt::format("checkpoint: the pieces of '{}' disagree on its whole shape ({} and {})",
                                piece["name"].get<std::string>(), entry["shape"].dump(), piece["shape"].dump()));
      entry["pieces"].push_back(
          {{"file", file}, {"entry", piece["entry"]}, {"offsets", piece["offsets"]}, {"sizes", piece["sizes"]}});
    }
  }
  json index = {{"format", "slapo sharded checkpoint 1"}, {"sections", sections}};
  write_file_atomically((fs::path(dir) / "index.json").string(), [&](std::ostream& out) { out << index.dump(1) << "\n"; },
                        "checkpoint");
}

ShardedCheckpoint::ShardedCheckpoint(const std::string& dir) : dir_(dir) {
  json index = read_json_file((fs::path(dir) / "index.json").string(), "resume");
  auto bad = [&](const std::string& what) {
    return Error(fmt::format("resume: '{}/index.json' is not a sharded checkpoint index: {}", dir, what));
  };
  if (!index.is_object() || !index.contains("sections") || !index["sections"].is_object()) throw bad("no sections");
  for (auto& [section, tensors] : index["sections"].items())
    for (auto& [name, e] : tensors.items()) {
      Entry& entry = sections_[section][name];
      try {
        entry.shape = e.at("shape").get<std::vector<int64_t>>();
        for (auto& p : e.at("pieces"))
          entry.pieces.push_back({p.at("file").get<std::string>(), p.at("entry").get<std::string>(),
                                  p.at("offsets").get<std::vector<int64_t>>(), p.at("sizes").get<std::vector<int64_t>>()});
      } catch (const nlohmann::json::exception&) {
        throw bad(fmt::format("the entry of '{}' is malformed (a shape and pieces of file, entry, offsets and sizes: "
                              "lists of integers)",
                              name));
      }
      for (const Piece& piece : entry.pieces) {
        if (piece.file.find('/') != std::string::npos || piece.file.rfind("..", 0) == 0)
          throw bad(fmt::format("the file '{}' is outside the checkpoint", piece.file));
        bool inside = piece.offsets.size() == entry.shape.size() && piece.sizes.size() == entry.shape.size();
        for (size_t d = 0; inside && d < entry.shape.size(); ++d)
          inside = piece.offsets[d] >= 0 && piece.sizes[d] >= 0 && piece.offsets[d] + piece.sizes[d] <= entry.shape[d];
        if (!inside)
          throw bad(fmt::format("a piece of '{}' at [{}] of size [{}] is not inside its shape {}", name,
                                fmt::join(piece.offsets, ", "), fmt::join(piece.sizes, ", "), shape_text(entry.shape)));
      }
    }
}

const MappedSafetensors& ShardedCheckpoint::file(const std::string& name) const {
  auto& slot = files_[name];
  if (!slot) slot = std::make_unique<MappedSafetensors>((fs::path(dir_) / name).string());
  return *slot;
}

at::Tensor ShardedCheckpoint::read_one(const std::string& name, const Entry& entry, const Placement& where) const {
  if (entry.pieces.empty()) throw Error(fmt::format("resume: '{}' lists no piece of '{}'", dir_, name));
  for (const Piece& piece : entry.pieces) {  // each is where the index says
    const MappedSafetensors& mapped = file(piece.file);
    if (!mapped.contains(piece.entry))
      throw Error(fmt::format("resume: '{}' lists '{}' of '{}' in '{}', which does not hold it", dir_, piece.entry,
                              name, piece.file));
    if (auto sizes = mapped.view(piece.entry).sizes().vec(); sizes != piece.sizes)
      throw Error(fmt::format("resume: '{}' in '{}/{}' is {}, its index says {}", piece.entry, dir_, piece.file,
                              shape_text(sizes), shape_text(piece.sizes)));
  }
  const auto local = where.local_shape();
  const auto& first = entry.pieces.front();
  at::Tensor out = torch::empty(local, file(first.file).view(first.entry).options());
  at::Tensor covered = torch::zeros(local, at::kBool);
  const size_t dims = entry.shape.size();
  for (const Box& box : where.boxes)
    for (const Piece& piece : entry.pieces) {
      // the overlap of the piece and the block, in the whole tensor's coordinates
      std::vector<int64_t> start(dims), length(dims);
      bool overlaps = true;
      for (size_t d = 0; d < dims && overlaps; ++d) {
        start[d] = std::max(box.offsets[d], piece.offsets[d]);
        length[d] = std::min(box.offsets[d] + box.sizes[d], piece.offsets[d] + piece.sizes[d]) - start[d];
        overlaps = length[d] > 0;
      }
      if (!overlaps) continue;
      at::Tensor dest = out, done = covered;
      for (size_t d = 0; d < dims; ++d) {
        int64_t at = box.at[d] + start[d] - box.offsets[d];
        dest = dest.narrow(static_cast<int64_t>(d), at, length[d]);
        done = done.narrow(static_cast<int64_t>(d), at, length[d]);
      }
      if (done.all().item<bool>()) continue;  // another rank's copy of the same block was read
      const MappedSafetensors& mapped = file(piece.file);
      at::Tensor source = mapped.view(piece.entry);
      for (size_t d = 0; d < dims; ++d)
        source = source.narrow(static_cast<int64_t>(d), start[d] - piece.offsets[d], length[d]);
      dest.copy_(source);
      done.fill_(true);
      mapped.release(piece.entry);
    }
  if (!covered.all().item<bool>()) {
    auto missing = at::nonzero(covered.logical_not())[0].contiguous();  // nonzero may be column-major
    throw Error(fmt::format("resume: the pieces in '{}' do not cover '{}' {}: no piece holds element [{}] of this "
                            "rank's slice (the index lists {} piece{})",
                            dir_, name, shape_text(entry.shape),
                            fmt::join(std::vector<int64_t>(missing.data_ptr<int64_t>(),
                                                           missing.data_ptr<int64_t>() + missing.numel()),
                                      ", "),
                            entry.pieces.size(), entry.pieces.size() == 1 ? "" : "s"));
  }
  return out;
}

NamedTensors ShardedCheckpoint::read(const std::string& section, const Module& model,
                                     const std::vector<std::string>& only) const {
  auto state = state_by_name(model);
  auto found = sections_.find(section);
  static const std::map<std::string, Entry> none;
  const auto& entries = found == sections_.end() ? none : found->second;
  const std::set<std::string> held(only.begin(), only.end());
  auto wanted = [&](const std::string& name) {  // P, or a name after it (P.exp_avg)
    if (held.empty() || held.count(name)) return true;
    for (auto dot = name.rfind('.'); dot != std::string::npos && dot > 0; dot = name.rfind('.', dot - 1))
      if (held.count(name.substr(0, dot))) return true;
    return false;
  };
  if (section == "model")
    for (auto& [name, info] : state)
      if (wanted(name) && !entries.count(name))
        throw Error(fmt::format("resume: the checkpoint '{}' has no '{}', which the model holds (its index lists {} "
                                "model tensors)",
                                dir_, name, entries.size()));
  // the experts of blocks shard_experts spread over ranks: each rank reads those it holds
  std::vector<std::string> spread;
  for (auto& [path, group] : expert_parallel_blocks(model)) spread.push_back(path + ".experts.");
  auto others_expert = [&](const std::string& name) {
    return !owner_of(state, name) &&
           std::any_of(spread.begin(), spread.end(), [&](auto& prefix) { return name.rfind(prefix, 0) == 0; });
  };
  NamedTensors out;
  for (auto& [name, entry] : entries) {
    if (!wanted(name) || others_expert(name)) continue;
    const auto* owner = entry.shape.empty() ? nullptr : owner_of(state, name);
    Placement where = placement_of(owner ? owner->splits : Splits{}, owner ? whole_shape(*owner) : entry.shape);
    if (owner && where.shape != entry.shape)
      throw Error(fmt::format("resume: '{}' is {} in the checkpoint '{}' but {} in this model", name,
                              shape_text(entry.shape), dir_, shape_text(where.shape)));
    out.emplace_back(name, read_one(name, entry, where));
  }
  return out;
}

}  // namespace slapo
