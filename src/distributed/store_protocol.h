// The wire format between the multi-node launcher's key-value store (StoreServer) and its
// clients (StoreClient): a frame is a 4-byte big-endian length, then an op or status byte, then
// fields, each a 4-byte big-endian length and its bytes. Numbers travel as decimal text.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace slapo::dist::store_protocol {

enum class Op : uint8_t {
  Set = 1,         // key, value
  Get = 2,         // timeout_ms, key: waits for the key
  Add = 3,         // key, delta: the sum, kept as decimal text (as c10d's TCPStore does)
  CompareSet = 4,  // key, expected, desired
  Check = 5,       // keys...
  Wait = 6,        // timeout_ms, keys...
  Delete = 7,      // key
  NumKeys = 8,
  SetEphemeral = 9,  // key, value: deleted when this connection closes (a launcher that died)
};

enum class Status : uint8_t { Ok = 0, Timeout = 1, Error = 2 };

using Field = std::vector<uint8_t>;

/// A whole frame, length included, ready to write.
std::vector<uint8_t> encode(uint8_t head, const std::vector<Field>& fields);
/// Takes one whole frame from the front of `buffer` (nothing while it is incomplete); false on a
/// malformed frame.
bool decode(std::vector<uint8_t>& buffer, bool& complete, uint8_t& head, std::vector<Field>& fields);

Field field(const std::string& text);
std::string text(const Field& f);

}  // namespace slapo::dist::store_protocol
