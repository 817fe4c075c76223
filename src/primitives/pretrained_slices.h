// build's first step for a model from_pretrained left on the meta device: each rank reads the
// slices it keeps straight from the mapped checkpoint.
#pragma once

#include <memory>
#include <unordered_set>

#include "core/module.h"

namespace slapo {

/// Gives every meta parameter below `root` that has a checkpoint source (ModuleMeta::sources) its
/// values: the whole tensor, or this rank's part of it when `shard` or `fully_shard` split it,
/// cast to the parameter's dtype, on the CPU. Only those bytes are read: a slice along the first
/// axis reads its own rows' pages, along another axis each row's piece. Ties get one tensor. The
/// sources are dropped after, so the checkpoint's files are unmapped. Returns how many
/// parameters it read.
///
/// With `defer`, nothing is read yet: each parameter becomes a placeholder of its shape that holds
/// no memory (a zero broadcast), keeping its source, until read_deferred_slices. A pipeline defers
/// until its first trace (which needs shapes, not values) names this rank's stages, so a stage
/// reads only what it runs.
int read_pretrained_slices(const std::shared_ptr<Module>& root, bool defer = false);

/// Reads the placeholders read_pretrained_slices left whose tensors `wanted` holds into those same
/// tensor objects (their data replaced), and forgets every other deferred source. Returns how many
/// it read.
int read_deferred_slices(Module& root, const std::unordered_set<const c10::TensorImpl*>& wanted);

}  // namespace slapo
