// How this process's heap (glibc malloc, which LibTorch's CPU allocator calls) gives memory back.
#pragma once

#include <string>

namespace slapo {

/// Applies SLAPO_MALLOC before anything allocates: unset or "glibc", glibc's own settings (the
/// default, chosen by measurement: bench/RESULTS.md, "The heap"); "keep", freed blocks up to 1 GiB
/// kept in the heap for the next allocation (faster where a step frees and allocates the same
/// large tensors, at up to 1 GiB more resident memory a process). GLIBC_TUNABLES naming malloc's
/// own tunables wins over both. Returns an error message for any other value (empty: applied).
std::string apply_heap_choice();

}  // namespace slapo
