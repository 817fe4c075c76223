// TorchScript .pt files as schedulable module trees.
#pragma once

#include <string>

#include "core/module.h"

namespace slapo {

/// Loads a TorchScript module; its submodules become children, its parameters and buffers are
/// shared with the script object, and forward runs the script's forward.
std::shared_ptr<Module> load_torchscript(const std::string& path);

}  // namespace slapo
