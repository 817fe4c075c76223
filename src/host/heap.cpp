// mallopt before anything allocates (see heap.h; docs/architecture.md, "Memory").
#include "host/heap.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace slapo {

void keep_freed_blocks_for_reuse() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  const char* choice = std::getenv("SLAPO_MALLOC");
  if ((tunables && std::strstr(tunables, "glibc.malloc.")) || (choice && std::strcmp(choice, "glibc") == 0)) return;
  // Blocks up to 1 GiB come from the heap (glibc's default maps each one of 32 MiB or more on its
  // own and unmaps it when freed), and up to 1 GiB free at its top stays there for reuse.
  constexpr int kGiB = 1 << 30;
  ::mallopt(M_MMAP_THRESHOLD, kGiB);
  ::mallopt(M_TRIM_THRESHOLD, kGiB);
}

}  // namespace slapo
