// build's first step for a model from_pretrained left on the meta device: each rank reads the
// slices it keeps straight from the mapped checkpoint.
#pragma once

#include <memory>

#include "core/module.h"

namespace slapo {

/// Gives every meta parameter below `root` that has a checkpoint source (ModuleMeta::sources) its
/// values: the whole tensor, or this rank's part of it when `shard` or `fully_shard` split it,
/// cast to the parameter's dtype, on the CPU. Only those bytes are read: a slice along the first
/// axis reads its own rows' pages, along another axis each row's piece. Ties get one tensor. The
/// sources are dropped after, so the checkpoint's files are unmapped. Returns how many
/// parameters it read.
int read_pretrained_slices(const std::shared_ptr<Module>& root);

}  // namespace slapo
