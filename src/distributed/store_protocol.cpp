#include "distributed/store_protocol.h"

namespace slapo::dist::store_protocol {

namespace {

constexpr uint32_t kMaxFrame = 1u << 30;  // a larger length is a stray connection, not a store client

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<uint8_t>(v >> shift));
}

uint32_t get_u32(const uint8_t* p) {
  return (uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]);
}

}  // namespace

std::vector<uint8_t> encode(uint8_t head, const std::vector<Field>& fields) {
  size_t length = 1;
  for (const auto& f : fields) length += 4 + f.size();
  std::vector<uint8_t> out;
  out.reserve(4 + length);
  put_u32(out, static_cast<uint32_t>(length));
  out.push_back(head);
  for (const auto& f : fields) {
    put_u32(out, static_cast<uint32_t>(f.size()));
    out.insert(out.end(), f.begin(), f.end());
  }
  return out;
}

bool decode(std::vector<uint8_t>& buffer, bool& complete, uint8_t& head, std::vector<Field>& fields) {
  complete = false;
  if (buffer.size() < 4) return true;
  uint32_t length = get_u32(buffer.data());
  if (length == 0 || length > kMaxFrame) return false;
  if (buffer.size() < 4 + size_t(length)) return true;
  const uint8_t* p = buffer.data() + 4;
  const uint8_t* end = p + length;
  head = *p++;
  fields.clear();
  while (p < end) {
    if (end - p < 4) return false;
    uint32_t n = get_u32(p);
    p += 4;
    if (uint64_t(end - p) < n) return false;
    fields.emplace_back(p, p + n);
    p += n;
  }
  buffer.erase(buffer.begin(), buffer.begin() + 4 + length);
  complete = true;
  return true;
}

Field field(const std::string& text) { return Field(text.begin(), text.end()); }

std::string text(const Field& f) { return std::string(f.begin(), f.end()); }

}  // namespace slapo::dist::store_protocol
