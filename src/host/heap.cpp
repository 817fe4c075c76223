// mallopt before anything allocates (see heap.h; docs/architecture.md, "Memory: the heap").
#include "host/heap.h"

#include <malloc.h>

#include <cstdlib>
#include <cstring>

namespace slapo {

std::string apply_heap_choice() {
  const char* choice = std::getenv("SLAPO_MALLOC");
  if (!choice || !*choice || std::strcmp(choice, "glibc") == 0) return "";
  if (std::strcmp(choice, "keep") != 0)
    return std::string("SLAPO_MALLOC='") + choice + "' is not a heap setting (choices: glibc, the default; keep)";
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  if (tunables && std::strstr(tunables, "glibc.malloc.")) return "";
  // Blocks up to 1 GiB come from the heap (glibc's default maps each one of 32 MiB or more on its
  // own and unmaps it when freed), and up to 1 GiB free at its top stays there for reuse.
  constexpr int kGiB = 1 << 30;
  ::mallopt(M_MMAP_THRESHOLD, kGiB);
  ::mallopt(M_TRIM_THRESHOLD, kGiB);
  return "";
}

}  // namespace slapo
