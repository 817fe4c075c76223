#include "plan/pins.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <numeric>

#include "core/error.h"

namespace slapo::plan {

bool Pins::any() const {
  return tp || tensor_parallel || dp || micro_batches || !stage_layers.empty() || checkpoint ||
         !stage_checkpoint.empty() || zero || fully_sharded || keep_gathered || sequence;
}

std::string Pins::describe() const {
  std::vector<std::string> parts;
  if (tp) parts.push_back(fmt::format("tp {}", tp));
  else if (tensor_parallel) parts.push_back("tensor parallel");
  if (dp) parts.push_back(fmt::format("dp {}", dp));
  if (!stage_layers.empty()) {
    std::vector<std::string> sizes;
    for (size_t i = 0; i < stage_layers.size(); ++i)
      sizes.push_back(fmt::format("{}{}", stage_layers[i], i < stage_checkpoint.size() && stage_checkpoint[i] ? "c" : ""));
    parts.push_back(fmt::format("pp {} ({} layers)", stage_layers.size(), fmt::join(sizes, "+")));
  }
  if (micro_batches) parts.push_back(fmt::format("{} micro", micro_batches));
  if (checkpoint && stage_checkpoint.empty()) parts.push_back(*checkpoint ? "checkpoint" : "no checkpoint");
  if (sequence) parts.push_back(*sequence ? "sequence" : "no sequence");
  if (zero) parts.push_back(*zero ? "zero-1" : "no zero-1");
  if (keep_gathered && *keep_gathered) parts.push_back("zero-2");
  else if (fully_sharded) parts.push_back(*fully_sharded ? "fully sharded" : "not fully sharded");
  return fmt::format("{}", fmt::join(parts, ", "));
}

void Pins::check(const ModelShape& model) const {
  if (stage_layers.size() > 1 && !model.one_stage_reason.empty())
    throw Error(fmt::format("plan: pinned stages ({}) cut {} into a pipeline, and it runs as one stage: {}",
                            fmt::join(stage_layers, "+"), model.name, model.one_stage_reason));
  if (!stage_layers.empty()) {
    for (int n : stage_layers)
      if (n < 1) throw Error(fmt::format("plan: pinned stages ({}) must each hold a layer or more", fmt::join(stage_layers, "+")));
    int sum = std::accumulate(stage_layers.begin(), stage_layers.end(), 0);
    if (sum != model.layers)
      throw Error(fmt::format("plan: pinned stages ({}) hold {} layers; {} has {}", fmt::join(stage_layers, "+"), sum,
                              model.name, model.layers));
  }
  if (!stage_checkpoint.empty() && stage_checkpoint.size() != stage_layers.size())
    throw Error(fmt::format("plan: pinned checkpointing names {} stages, the pinned stages are {}",
                            stage_checkpoint.size(), stage_layers.size()));
  if (zero && *zero && fully_sharded && *fully_sharded)
    throw Error("plan: pins ask for ZeRO-1 and fully sharded at once; a stage's replicas shard one way");
  if (keep_gathered && *keep_gathered && fully_sharded && !*fully_sharded)
    throw Error("plan: pins keep the weights gathered (reshard_after_forward = false) but not fully sharded; "
                "that setting is fully_shard's");
}

bool Pins::kept_by(const Candidate& c, int layers) const {
  const auto stages = c.resolved(layers);
  if (micro_batches && c.micro_batches != micro_batches) return false;
  if (!stage_layers.empty() && stages.size() != stage_layers.size()) return false;
  for (size_t i = 0; i < stages.size(); ++i) {
    const Stage& s = stages[i];
    if ((tp && s.tp != tp) || (tensor_parallel && s.tp < 2) || (dp && s.dp != dp)) return false;
    if (!stage_layers.empty() && s.layers != stage_layers[i]) return false;
    if (!stage_checkpoint.empty() ? s.checkpoint != stage_checkpoint[i] : checkpoint && s.checkpoint != *checkpoint)
      return false;
    if ((zero && s.zero != *zero) || (sequence && s.sequence != *sequence)) return false;
    if (fully_sharded && s.fully_sharded != *fully_sharded) return false;
    if (keep_gathered && (s.fully_sharded && s.keep_gathered) != *keep_gathered) return false;
  }
  return true;
}

std::optional<Candidate> Pins::reshape(const Candidate& c, int layers) const {
  Candidate r = c;
  if (c.uniform_mesh() && !stage_layers.empty() && c.pp() == static_cast<int>(stage_layers.size())) {
    const bool pipeline = stage_layers.size() > 1;
    for (size_t i = 0; pipeline && i < stage_layers.size(); ++i) r.stages[i].layers = stage_layers[i];
    if (!stage_checkpoint.empty()) {
      for (size_t i = 0; pipeline && i < stage_checkpoint.size(); ++i) r.stages[i].checkpoint = stage_checkpoint[i];
      r.checkpoint = std::all_of(stage_checkpoint.begin(), stage_checkpoint.end(), [](bool b) { return b; });
    }
  }
  if (!kept_by(r, layers)) return std::nullopt;
  return r;
}

}  // namespace slapo::plan
