// JSON from files and buffers a user hands us, parsed with a nesting limit: a document nested
// deeper than any config or checkpoint header is refused before code that walks JSON recursively
// (copies, Lua conversion) can exhaust the stack.
#pragma once

#include <nlohmann/json.hpp>

#include <stdexcept>
#include <string>

namespace slapo {

constexpr int kMaxJsonDepth = 128;

/// nlohmann::json::parse(input) that throws std::invalid_argument past kMaxJsonDepth levels and
/// nlohmann's own exceptions (std::exception, both) on malformed text.
template <class... Input>
nlohmann::json parse_json_limited(Input&&... input) {
  return nlohmann::json::parse(std::forward<Input>(input)...,
                               [](int depth, nlohmann::json::parse_event_t, nlohmann::json&) {
                                 if (depth > kMaxJsonDepth)
                                   throw std::invalid_argument("nested deeper than " + std::to_string(kMaxJsonDepth) +
                                                               " levels");
                                 return true;
                               });
}

/// The JSON document in the regular file `path`, parsed with the nesting limit. Errors name `who`
/// (the function) and the file: not a regular file, unreadable, or not valid JSON.
nlohmann::json read_json_file(const std::string& path, const std::string& who);

}  // namespace slapo
