// Hugging Face model directories: config.json + safetensors, in both directions.
#pragma once

#include <string>

#include "core/module.h"
#include "core/schedule.h"
#include "io/safetensors.h"
#include "models/zoo.h"

namespace slapo {

/// Builds the model named by `dir`/config.json's model_type and loads its weights. Checkpoints of
/// the base model (keys without "transformer." / "bert." / "model.") load too; keys for buffers HF
/// no longer keeps (attn.bias, position_ids, inv_freq) are skipped. A missing weight is an error.
std::shared_ptr<Module> from_pretrained(const std::string& dir, const BuildOptions& options = {});

/// Writes `dir`/config.json (zoo models) and the weights, tied ones once under their first name.
void save_pretrained(Module& model, const std::string& dir, int64_t max_shard_bytes = 0);

/// Writes a sharded model as one Hugging Face checkpoint: every rank of the schedule's group
/// gathers each sharded parameter (in its shard layout, fused QKV sections included); rank 0
/// writes config.json and the full tensors. Every rank of the group must call it.
void save_consolidated(Schedule& sch, const std::string& dir, int64_t max_shard_bytes = 0);

/// Copies `tensors` into `model`'s parameters by name (the rules of from_pretrained). Returns the
/// checkpoint keys it ignored.
std::vector<std::string> load_weights(Module& model, const NamedTensors& tensors, const std::string& source);

}  // namespace slapo
