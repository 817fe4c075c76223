// The c10d type our groups hold. LibTorch 1.x implements collectives in ProcessGroup subclasses
// (ProcessGroupGloo, ProcessGroupNCCL); 2.x moved them to Backend subclasses with the same
// collective calls. One alias keeps the rest of src/distributed the same on both. Declarations only:
// the files that call the collectives include ProcessGroup.hpp themselves.
#pragma once

#include <torch/version.h>

namespace c10d {
class ProcessGroup;
class Backend;
}  // namespace c10d

namespace slapo::dist {

#if TORCH_VERSION_MAJOR >= 2
using CollectiveBackend = c10d::Backend;
#else
using CollectiveBackend = c10d::ProcessGroup;
#endif

}  // namespace slapo::dist
