// The subcommands of slapo-lua; each returns the process exit code.
#pragma once

#include <string>
#include <vector>

#include "host/launcher.h"

namespace slapo {

/// Runs a script; with several ranks (and no RANK in the environment) launches this node's.
/// `profile`: write a chrome trace of the run there.
int cmd_run(const std::string& script, const std::vector<std::string>& args, const LaunchOptions& launch = {},
            const std::string& profile = "");
/// Runs spec files; with several ranks every rank runs them (multi-rank specs) and rank 0 reports.
int cmd_test(const std::vector<std::string>& paths, const LaunchOptions& launch = {});
int cmd_inspect(const std::string& model);
/// Runs a script again in a fresh Lua state whenever a .lua file beside it changes.
int cmd_watch(const std::string& script, const std::vector<std::string>& args);
/// Writes an SVG chart of a metrics.jsonl (stdlib/slapo/plot.lua).
int cmd_plot(const std::vector<std::string>& files);
/// The interactive prompt; runs SCRIPT first when given.
int cmd_repl(const std::string& script);

struct PlanArgs {
  std::string model, cluster = "1x1:cpu", out, dtype = "float32", pick, layer_costs = "ilp";
  std::string from;  ///< a schedule file whose primitives pin choices (plan/pins.h)
  int64_t batch = 8, seq = 128, documents = 0;
  int steps = 3, max_stages = 0;
};
/// Plans a parallel layout for a model on a cluster and writes it as a Lua schedule script.
int cmd_plan(const PlanArgs& args);

struct ProfileDeviceArgs {
  std::string device = "cpu", out;
  int threads = 0;
  int ranks = 1;  ///< CPU: measure beside ranks - 1 copies of the same profile, as a plan's ranks share the machine
  bool quick = false;
};
/// Measures this machine's device into a profile (devices/*.json's format) for `plan --cluster`.
int cmd_profile_device(const ProfileDeviceArgs& args);

struct TokenizeArgs {
  std::string tokenizer, out, field = "text";
  std::vector<std::string> inputs;
  bool no_eos = false;
};
/// Tokenizes text and JSON-lines files into one token file (text/token_file.h).
int cmd_tokenize(const TokenizeArgs& args);

struct TuneArgs {
  std::string script, db = "tune.jsonl", search = "auto", show;
  std::vector<std::string> args;
  int nproc = 1, budget = 0, from_plan = 0;
  double timeout = 600, memory_mib = 0;
};
/// Runs a script once per configuration of its knobs (stdlib/slapo/tune.lua), or with `show`
/// prints a tuning database's leaderboard.
int cmd_tune(const TuneArgs& args);
/// `run --knob name=value ...`: merges the values into SLAPO_KNOBS (JSON) for the script and its
/// ranks; numbers and true/false keep their type. Returns an error message, empty when fine.
std::string set_knobs_env(const std::vector<std::string>& assignments);

/// Under torchrun's environment (or the launcher) joins the world before any script runs, so every
/// rank meets at the same rendezvous whatever the script does first. Returns this rank.
int join_world_from_env();

/// Prints a failure of a script ("slapo-lua: <message with traceback>") to stderr.
void report_error(const std::string& message);

}  // namespace slapo
