// Printing the schedule log as replayable Lua.
#include "core/schedule_log.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace slapo {

std::string lua_quote(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 32) out += fmt::format("\\{:03d}", static_cast<int>(c));
        else out += c;
    }
  }
  return out + "\"";
}

std::string lua_literal(const Value& v) {
  if (v.isNone()) return "nil";
  if (v.isBool()) return v.toBool() ? "true" : "false";
  if (v.isInt()) return std::to_string(v.toInt());
  if (v.isDouble()) {
    double d = v.toDouble();
    if (std::isinf(d)) return d > 0 ? "math.huge" : "-math.huge";
    return fmt::format("{}", d);
  }
  if (v.isString()) return lua_quote(v.toStringRef());
  if (v.isList() || v.isTuple()) {
    auto items = v.isList() ? v.toListRef().vec() : v.toTupleRef().elements().vec();
    std::vector<std::string> parts;
    for (auto& item : items) parts.push_back(lua_literal(item));
    return "{" + fmt::format("{}", fmt::join(parts, ", ")) + "}";
  }
  if (v.isGenericDict()) {
    std::vector<std::string> parts;
    for (auto& item : v.toGenericDict()) parts.push_back(item.key().toStringRef() + " = " + lua_literal(item.value()));
    std::sort(parts.begin(), parts.end());
    return "{" + fmt::format("{}", fmt::join(parts, ", ")) + "}";
  }
  throw Error(fmt::format("schedule log: cannot write a {} as a Lua literal", v.tagKind()));
}

std::string ScheduleLog::to_lua() const {
  std::string out = fmt::format("-- slapo schedule log: {} primitive{}\nreturn function(sch, args)\n", entries_.size(),
                                entries_.size() == 1 ? "" : "s");
  for (auto& e : entries_) {
    std::string target = e.path.empty() ? "sch" : "sch[" + lua_quote(e.path) + "]";
    out += fmt::format("  {}:{}({})", target, e.primitive, fmt::join(e.lua_args, ", "));
    if (!e.source.empty()) out += "  -- " + e.source;
    out += "\n";
  }
  return out + "end\n";
}

}  // namespace slapo
