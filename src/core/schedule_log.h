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
  void note_syncs_moved(const std::string& from, const std::string& to) {
    moves_.push_back({entries_.size(), from, to, false});
  }
  /// checkpoint/fuse of a subgraph moved the module at `from`, with everything below it, to `to`:
  /// whatever was logged before on that subtree now lives under `to`.
  void note_module_moved(const std::string& from, const std::string& to) {
    moves_.push_back({entries_.size(), from, to, true});
  }
  /// Where entry `index` (of `primitive`, logged on `path`) acts now, after the moves since.
  std::string current_path(size_t index, const std::string& primitive, std::string path) const {
    for (const auto& m : moves_) {
      if (index >= m.before) continue;
      if (m.subtree && (path == m.from || path.rfind(m.from + ".", 0) == 0))
        path = m.to + path.substr(m.from.size());
      else if (!m.subtree && primitive == "sync" && path == m.from)
        path = m.to;
    }
    return path;
  }

  /// Lua source of a chunk returning `function(sch, args) ... end` that re-applies every entry;
  /// `args` holds the values that have no literal form (modules, functions), printed as args[N]:
  ///   load(sch:log())()(slapo.create_schedule(fresh_model), sch:log_args())
  std::string to_lua() const;

 private:
  struct Move {
    size_t before;  // entries before this one are the ones it moved
    std::string from, to;
    bool subtree;  // the whole subtree (checkpoint/fuse), else only the syncs on `from` (replace)
  };
  std::vector<LogEntry> entries_;
  std::vector<Move> moves_;
};

/// An IValue written as a Lua literal: 3, 0.5, true, "str", nil, {1, 2}, {key = v}.
std::string lua_literal(const Value& v);
/// A string as a double-quoted Lua literal with escapes.
std::string lua_quote(const std::string& s);

}  // namespace slapo
