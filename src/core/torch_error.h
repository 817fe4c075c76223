// LibTorch's error messages as users should read them.
#pragma once

#include <exception>
#include <string>

namespace slapo {

/// The message of `e`; LibTorch's errors (c10::Error) without the C++ backtrace they carry, which
/// users have no use for.
std::string message_without_backtrace(const std::exception& e);

}  // namespace slapo
