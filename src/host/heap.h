// How this process's heap (glibc malloc, which LibTorch's CPU allocator calls) gives memory back.
#pragma once

namespace slapo {

/// Freed blocks stay in the heap for the next allocation instead of going back to the kernel at
/// once: a training step frees and allocates the same large tensors (logits, activations) every
/// step, and each block glibc would unmap comes back as fresh pages the kernel must zero. Skipped
/// when GLIBC_TUNABLES sets malloc's own, or SLAPO_MALLOC=glibc asks for glibc's defaults.
void keep_freed_blocks_for_reuse();

}  // namespace slapo
