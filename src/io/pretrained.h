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
/// gathers each sharded parameter (in its shard layout, fused QKV sections included); one rank
/// (the lowest that holds the whole model) writes config.json and the full tensors. Every rank
/// of the world must call it.
void save_consolidated(Schedule& sch, const std::string& dir, int64_t max_shard_bytes = 0);

/// `params` (named, in one order on every rank of the schedule's group) with each sharded one
/// gathered over that group into its full tensor. A collective of the group.
NamedTensors gather_shards(Schedule& sch, const std::vector<std::pair<std::string, at::Tensor>>& params,
                           const char* caller);
/// True on exactly one rank of the world: the lowest one whose `holds_full_model` is true (data
/// parallel replicas hold the same model; one writes). A collective of the world.
bool elected_writer(bool holds_full_model, const char* caller);
/// config.json (zoo models) and `tensors` as safetensors in `dir`.
void write_pretrained(const Module& model, const std::string& dir, const NamedTensors& tensors,
                      int64_t max_shard_bytes = 0);

/// Copies `tensors` into `model`'s parameters by name (the rules of from_pretrained). Returns the
/// checkpoint keys it ignored.
std::vector<std::string> load_weights(Module& model, const NamedTensors& tensors, const std::string& source);

}  // namespace slapo
