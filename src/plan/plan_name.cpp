// Reading a plan's name (Candidate::describe's forms) back into the plan.
#include "plan/plan_name.h"

#include <algorithm>
#include <regex>
#include <set>

#include "core/error.h"

namespace slapo::plan {

namespace {

const char* kForms =
    "'tp T x dp D[, ep E | , cp C[ all-to-all]][, M micro][, sequence][, checkpoint][, zero-1 | , zero-2 | , fully "
    "sharded]', 'tp T x dp D x pp P (L+Lc+..), M micro[, ...]' (c: a checkpointed stage) or 'pp P on tp x dp "
    "TxD,TxDsz,.. (L+Lc+.. layers), M micro' (s: sequence parallelism, z: ZeRO-1 on that mesh)";

[[noreturn]] void refuse(const std::string& name, const std::string& why) {
  throw Error(fmt::format("plan: --pick '{}': {}; a plan is written as {}", name, why, kForms));
}

// The pieces of `text` between each `separator` (one piece where there is none).
std::vector<std::string> split(const std::string& text, const std::string& separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (size_t at; (at = text.find(separator, start)) != std::string::npos; start = at + separator.size())
    parts.push_back(text.substr(start, at - start));
  parts.push_back(text.substr(start));
  return parts;
}

int number(const std::string& text) { return std::stoi(text); }  // the patterns allow at most 6 digits

struct StageLayers {
  int layers;
  bool checkpoint;
};

// "6+6c": each stage's layer count, c where it is checkpointed.
std::vector<StageLayers> stage_layers(const std::string& name, const std::string& text) {
  static const std::regex one(R"((\d{1,6})(c?))");
  std::vector<StageLayers> out;
  for (const auto& part : split(text, "+")) {
    std::smatch m;
    if (!std::regex_match(part, m, one))
      refuse(name, fmt::format("'{}' is not a stage's layer count (a number, c after it where checkpointed)", part));
    out.push_back({number(m[1]), m[2].length() > 0});
  }
  return out;
}

// The settings after the first part: "ep 2", "cp 2 all-to-all", "4 micro", "sequence", ...
struct Settings {
  int ep = 1, cp = 1, micro = 1;
  bool cp_all_to_all = false, sequence = false, checkpoint = false, zero = false, fully_sharded = false,
       keep_gathered = false;
  std::set<std::string> given;  // which were named ("micro", "zero-1", ...)
};

Settings read_settings(const std::string& name, const std::vector<std::string>& parts) {
  static const std::regex ep(R"(ep (\d{1,6}))"), cp(R"(cp (\d{1,6})( all-to-all)?)"),
      micro(R"((\d{1,6}) micro(-batches)?)");
  Settings s;
  for (size_t i = 1; i < parts.size(); ++i) {
    const std::string& part = parts[i];
    std::smatch m;
    std::string key;
    if (std::regex_match(part, m, ep)) key = "ep", s.ep = number(m[1]);
    else if (std::regex_match(part, m, cp)) key = "cp", s.cp = number(m[1]), s.cp_all_to_all = m[2].length() > 0 && s.cp > 1;
    else if (std::regex_match(part, m, micro)) key = "micro", s.micro = number(m[1]);
    else if (part == "sequence") key = part, s.sequence = true;
    else if (part == "checkpoint") key = part, s.checkpoint = true;
    else if (part == "zero-1") key = part, s.zero = true;
    else if (part == "zero-2") key = part, s.fully_sharded = s.keep_gathered = true;
    else if (part == "fully sharded") key = part, s.fully_sharded = true;
    else
      refuse(name, fmt::format("'{}' is not a setting (ep E, cp C, cp C all-to-all, M micro, sequence, checkpoint, "
                               "zero-1, zero-2, fully sharded)",
                               part));
    if (!s.given.insert(key).second) refuse(name, fmt::format("'{}' is given twice", key));
  }
  auto both = [&](const char* a, const char* b) { return s.given.count(a) && s.given.count(b); };
  if (both("zero-1", "zero-2") || both("zero-1", "fully sharded") || both("zero-2", "fully sharded"))
    refuse(name, "zero-1, zero-2 and fully sharded are one or the other");
  if (both("ep", "cp")) refuse(name, "ep and cp are one or the other");
  if (s.micro < 1 || s.ep < 1 || s.cp < 1) refuse(name, "micro-batches, ep and cp are at least 1");
  return s;
}

}  // namespace

Candidate parse_plan_name(const std::string& text) {
  // leading spaces are not part of the name, nor is a table row after it (its columns are two or
  // more spaces apart; a name has single spaces): a row pasted whole reads as its plan
  std::string name = std::regex_replace(text, std::regex(R"(^\s+)"), "");
  name = std::regex_replace(name.substr(0, name.find("  ")), std::regex(R"(\s+$)"), "");
  static const std::regex one_stage(R"(tp (\d{1,6}) x dp (\d{1,6}))"),
      one_layout(R"(tp (\d{1,6}) x dp (\d{1,6}) x pp (\d{1,6}) \(([^()]*?)( layers)?\))"),
      meshes(R"(pp (\d{1,6}) on tp x dp ([^ ]+) \(([^()]*?)( layers)?\))");
  // a mesh list's own commas have no space after them
  const auto parts = split(name, ", ");
  std::smatch m;
  const bool layout = std::regex_match(parts[0], m, one_stage) || std::regex_match(parts[0], m, one_layout);
  if (!layout && !std::regex_match(parts[0], m, meshes))
    refuse(name, fmt::format("'{}' is not how a plan begins", parts[0]));
  const Settings s = read_settings(name, parts);
  Candidate c;
  c.micro_batches = s.micro;
  if (layout) {
    c.tp = number(m[1]), c.dp = number(m[2]);
    c.ep = s.ep, c.cp = s.cp, c.cp_all_to_all = s.cp_all_to_all, c.sequence = s.sequence, c.zero = s.zero;
    c.fully_sharded = s.fully_sharded, c.keep_gathered = s.keep_gathered, c.checkpoint = s.checkpoint;
    if (m.size() > 3) {  // one rank layout in pipeline stages
      auto layers = stage_layers(name, m[4]);
      if (static_cast<int>(layers.size()) != number(m[3]))
        refuse(name, fmt::format("pp {} names {} stages' layer counts", number(m[3]), layers.size()));
      for (auto& l : layers)
        c.stages.push_back({l.layers, c.tp, c.dp, l.checkpoint || s.checkpoint, c.zero, c.sequence, c.fully_sharded,
                            c.keep_gathered, c.ep, c.cp, c.cp_all_to_all});
      c.checkpoint = std::all_of(c.stages.begin(), c.stages.end(), [](const Stage& st) { return st.checkpoint; });
    }
  } else {
    // each stage's settings are its mesh's letters and its layers' c: the one-layout settings do not apply
    for (const auto& key : s.given)
      if (key != "micro")
        refuse(name, fmt::format("'{}' is not a setting of a plan with a mesh per stage (each mesh says its own: "
                                 "TxD, s for sequence parallelism, z for ZeRO-1; each stage's layers c where checkpointed)",
                                 key));
    auto layers = stage_layers(name, m[3]);
    const auto mesh_names = split(m[2], ",");
    const int stages = number(m[1]);
    if (static_cast<int>(layers.size()) != stages || static_cast<int>(mesh_names.size()) != stages)
      refuse(name, fmt::format("pp {} names {} meshes and {} stages' layer counts", stages, mesh_names.size(),
                               layers.size()));
    static const std::regex mesh(R"((\d{1,6})x(\d{1,6})(s?)(z?))");
    for (int i = 0; i < stages; ++i) {
      std::smatch mm;
      if (!std::regex_match(mesh_names[i], mm, mesh))
        refuse(name, fmt::format("'{}' is not a mesh (TxD, s after it for sequence parallelism, z for ZeRO-1)",
                                 mesh_names[i]));
      Stage st;
      st.layers = layers[i].layers, st.checkpoint = layers[i].checkpoint;
      st.tp = number(mm[1]), st.dp = number(mm[2]), st.sequence = mm[3].length() > 0, st.zero = mm[4].length() > 0;
      c.stages.push_back(st);
    }
    // the candidate's own fields as the inter-op program sets them for a plan of its own meshes
    c.tp = c.stages[0].tp, c.dp = c.stages[0].dp, c.zero = c.stages[0].zero;
    c.sequence = std::all_of(c.stages.begin(), c.stages.end(), [](const Stage& st) { return st.sequence; });
    c.checkpoint = std::all_of(c.stages.begin(), c.stages.end(), [](const Stage& st) { return st.checkpoint; });
  }
  if (c.tp < 1 || c.dp < 1 || std::any_of(c.stages.begin(), c.stages.end(), [](const Stage& st) {
        return st.tp < 1 || st.dp < 1 || st.layers < 1;
      }))
    refuse(name, "tp, dp and each stage's layers are at least 1");
  if (c.stages.size() == 1) c.stages.clear();  // one stage: tp x dp with gradient accumulation
  return c;
}

}  // namespace slapo::plan
