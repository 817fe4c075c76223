// CPU memory mapped from the system for one buffer and unmapped when it is freed. For large
// buffers that come and go many times a step (fully_shard's gathered whole parameters): from the
// heap, each one freed leaves a hole that smaller tensors split, so the next one of its size lands
// above them and the heap keeps growing (fully sharded TinyLlama: ~0.5 GiB a rank).
#pragma once

#include <ATen/ATen.h>
#include <c10/core/Allocator.h>

#include <cstddef>

namespace slapo {

/// CPU buffers of at least this many bytes are mapped on their own where they are asked for.
constexpr size_t kMappedBytes = size_t(1) << 20;

/// `bytes` of zeroed CPU memory in a mapping of its own, reported to LibTorch's memory profiler
/// (and so to slapo's tensor meter) as the CPU allocator reports its own: the allocation where a
/// meter listens, its free where one listens then too.
c10::DataPtr mapped_allocation(size_t bytes);

/// A contiguous CPU tensor of `sizes` over the `bytes` that `data` owns (freed with the last tensor
/// over it): a fixed-size storage, which a resize refuses.
at::Tensor cpu_tensor_over(c10::DataPtr data, size_t bytes, at::IntArrayRef sizes, const at::TensorOptions& options);

/// An uninitialised contiguous tensor: on the CPU from kMappedBytes in a mapping of its own, else
/// as at::empty gives it.
at::Tensor empty_mapped(at::IntArrayRef sizes, const at::TensorOptions& options);

}  // namespace slapo
