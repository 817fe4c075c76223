// The message of the slapo::Error a call raises, or "" when it raises none.
#pragma once

#include <functional>
#include <string>

#include "core/error.h"

inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const slapo::Error& e) {
    return e.what();
  }
  return "";
}
