// The ordered record of applied primitives; prints as Lua that replays them on a fresh model.
#pragma once

#include <string>
#include <vector>

#include "core/module.h"

namespace slapo {

struct LogEntry {
  std::string primitive;              ///< "shard", same name as the Lua method
  std::string path;                   ///< module path the primitive was applied to ("" = root)
  std::vector<std::string> lua_args;  ///< arguments, each already Lua source ("\"weight\"", "0")
  std::string source;                 ///< "bert_schedule.lua:12", where the script asked for it
};

class ScheduleLog {
 public:
  void append(LogEntry entry) { entries_.push_back(std::move(entry)); }
  const std::vector<LogEntry>& entries() const { return entries_; }
  size_t size() const { return entries_.size(); }
  /// Drops the entries after the first `n` (a rolled-back schedule), and the moves they made.
  void truncate(size_t n) {
    if (n < entries_.size()) entries_.resize(n);
    while (!moves_.empty() && moves_.back().before >= n) moves_.pop_back();
  }

  /// A subgraph `replace` moved the syncs of the module at `from` onto the one at `to`: the syncs
  /// logged before now run there (the printed tree shows them there; the log itself replays as is).
  void note_syncs_moved(const std::string& from, const std::string& to) { moves_.push_back({entries_.size(), from, to}); }
  /// Where the syncs logged as entry `index` on `path` run now.
  std::string sync_path(size_t index, std::string path) const {
    for (const auto& m : moves_)
      if (index < m.before && path == m.from) path = m.to;
    return path;
  }

  /// Lua source of a chunk returning `function(sch, args) ... end` that re-applies every entry;
  /// `args` holds the values that have no literal form (modules, functions), printed as args[N]:
  ///   load(sch:log())()(slapo.create_schedule(fresh_model), sch:log_args())
  std::string to_lua() const;

 private:
  struct SyncMove {
    size_t before;  // entries before this one are the syncs it moved
    std::string from, to;
  };
  std::vector<LogEntry> entries_;
  std::vector<SyncMove> moves_;
};

/// An IValue written as a Lua literal: 3, 0.5, true, "str", nil, {1, 2}, {key = v}.
std::string lua_literal(const Value& v);
/// A string as a double-quoted Lua literal with escapes.
std::string lua_quote(const std::string& s);

}  // namespace slapo
