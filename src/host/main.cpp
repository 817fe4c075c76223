// slapo-lua: the command line (run, test, inspect, --help, --version).
#include <CLI/CLI.hpp>

#include <algorithm>
#include <cstdio>
#include <fmt/format.h>

#include <unistd.h>

#include "core/error.h"
#include "core/data_dirs.h"
#include "host/commands.h"
#include "host/heap.h"
#include "lua/jit_policy.h"
#include "slapo/build_config.h"

namespace {

// --version's second line: the LuaJIT built against, and whether its trace compiler runs
std::string luajit_line() {
  try {
    return std::string(LUAJIT_VERSION) + ", " + slapo::choose_jit(LUAJIT_VERSION, std::getenv("SLAPO_JIT")).reason;
  } catch (const slapo::Error& e) {
    return std::string(LUAJIT_VERSION) + ", " + e.what();
  }
}

// The options of `run` that take a value (the value may look like a script name).
bool takes_value(const std::string& option) {
  for (const char* name : {"--nproc", "--profile", "--knob", "--nnodes", "--node-rank", "--master-addr", "--master-port",
                           "--rdzv-timeout", "--max-restarts"})
    if (option == name) return true;
  return false;
}

// torchrun's launch options, for `run` and `test`.
void add_launch_options(CLI::App* cmd, slapo::LaunchOptions& o, const std::string& ranks_do) {
  cmd->add_option("--nproc", o.nproc, "spawn N ranks on this node (Gloo on CPU) that " + ranks_do)
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--nnodes", o.nnodes, "nodes in the run, one launcher each (torchrun's meaning)")
      ->check(CLI::Range(1, 65536));
  cmd->add_option("--node-rank", o.node_rank, "this node's rank, 0 .. nnodes - 1; node 0 serves the rendezvous")
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--master-addr", o.master_addr,
                  "node 0's address, as every node reaches it; node 0's launcher listens there alone");
  cmd->add_option("--master-port", o.master_port, "the rendezvous port on --master-addr (default 29500)")
      ->check(CLI::Range(1, 65535));
  cmd->add_option("--rdzv-timeout", o.rdzv_timeout_s, "seconds a launcher waits for the other nodes (default 300)")
      ->check(CLI::Range(1, 86400));
  cmd->add_option("--max-restarts", o.max_restarts,
                  "after a rank fails, start every rank of every node again, this many times at most (default 0)")
      ->check(CLI::Range(0, 1000000));
}

// What is wrong with a launch's options, or "".
std::string launch_error(const std::string& command, const slapo::LaunchOptions& o) {
  if (o.node_rank >= o.nnodes)
    return fmt::format("{}: --node-rank {} is outside --nnodes {} (valid: 0 .. {})", command, o.node_rank, o.nnodes,
                       o.nnodes - 1);
  if (o.multi_node() && o.master_addr.empty())
    return fmt::format("{}: --nnodes {} needs --master-addr, node 0's address as every node reaches it", command,
                       o.nnodes);
  return "";
}

// `slapo-lua run [OPTIONS] SCRIPT [ARGS...]`: everything after SCRIPT belongs to the script, even
// arguments that look like options ("--tp 2"). Returns the index of SCRIPT in argv, or argc.
// `slapo-lua tune [OPTIONS] SCRIPT -- ARGS`: the script's arguments follow "--", which is at the
// returned index (SCRIPT is an ordinary positional there).
int script_position(int argc, char** argv) {
  int i = 1;
  while (i < argc && argv[i][0] == '-') ++i;  // global flags (--help, --version)
  if (i < argc && std::string(argv[i]) == "tune") {
    for (int j = i + 1; j < argc; ++j)
      if (std::string(argv[j]) == "--") return j;
    return argc;
  }
  if (i >= argc || std::string(argv[i]) != "run") return argc;
  for (++i; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--") return i + 1 < argc ? i + 1 : argc;
    if (takes_value(a)) ++i;  // the option's value
    else if (a.empty() || a[0] != '-') return i;
  }
  return argc;
}

// "<command>: unknown option '--x' (did you mean '--y'?)" for the first option `args` holds that
// the subcommand `command` does not have (torchrun's --node_rank where ours is --node-rank), or "".
std::string unknown_option_hint(CLI::App& app, const std::string& command, const std::vector<std::string>& args) {
  CLI::App* sub = nullptr;
  for (auto* candidate : app.get_subcommands({}))
    if (candidate->get_name() == command) sub = candidate;
  if (!sub) return "";
  std::vector<std::string> names;
  for (const auto* option : sub->get_options())
    for (const auto& name : option->get_lnames()) names.push_back("--" + name);
  for (const auto& arg : args) {
    if (arg.rfind("--", 0) != 0 || arg == "--") continue;
    std::string flag = arg.substr(0, arg.find('='));
    if (std::find(names.begin(), names.end(), flag) != names.end()) continue;
    std::string hyphens = flag;
    std::replace(hyphens.begin() + 2, hyphens.end(), '_', '-');
    auto close = std::find(names.begin(), names.end(), hyphens) != names.end()
                     ? std::vector<std::string>{hyphens}
                     : slapo::closest_names(flag, names, 1);
    return fmt::format("{}: unknown option '{}'{}; slapo-lua help {} lists its options", command, flag,
                       close.empty() ? "" : fmt::format(" (did you mean '{}'?)", close[0]), command);
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string heap_error = slapo::apply_heap_choice();  // before anything allocates
  if (!heap_error.empty()) {
    std::fprintf(stderr, "slapo-lua: %s\n", heap_error.c_str());
    return 2;
  }
  slapo::set_program_name(argv[0]);       // the commands it suggests name it as the user did
  CLI::App app{"slapo-lua: schedule a LibTorch model from Lua without touching its definition", "slapo-lua"};
  app.set_version_flag("--version", std::string("slapo-lua ") + SLAPO_VERSION + "\n" + luajit_line());
  app.require_subcommand(1);

  std::string script;
  auto* run = app.add_subcommand("run", "Run a Lua script: slapo-lua run SCRIPT.lua [ARGS...]");
  slapo::LaunchOptions run_launch;
  add_launch_options(run, run_launch, "all run the script");
  std::string profile;
  run->add_option("--profile", profile, "write a chrome trace (spans per module path) to this .json file");
  bool watch = false;
  run->add_flag("--watch", watch, "run again on every change of a .lua file beside the script");
  std::vector<std::string> knob_values;
  run->add_option("--knob", knob_values, "set a knob the script declares with slapo.knob: --knob batch=16 (repeatable)");
  run->add_option("script", script, "the Lua script; the arguments after it are the script's arg[1..n]")->required();

  std::vector<std::string> test_paths;
  auto* test = app.add_subcommand("test", "Run Lua spec files (*_spec.lua) and must-fail scripts (errors/*.lua)");
  slapo::LaunchOptions test_launch;
  add_launch_options(test, test_launch, "all run the specs (multi-rank specs)");
  test->add_option("paths", test_paths, "spec files or directories")->required();

  std::string model;
  auto* inspect = app.add_subcommand("inspect", "Print a model's module tree (preset name, HF directory or .pt file)");
  inspect->add_option("model", model, "preset name, Hugging Face model directory or TorchScript .pt file")->required();

  int script_at = script_position(argc, argv);
  std::vector<std::string> script_args(argv + std::min(script_at + 1, argc), argv + argc);
  std::vector<std::string> plot_args;
  auto* plot = app.add_subcommand("plot", "Chart a metrics.jsonl as SVG: slapo-lua plot metrics.jsonl [out.svg]");
  plot->add_option("files", plot_args, "metrics.jsonl, then optionally the SVG to write")->required()->expected(1, 2);

  slapo::TokenizeArgs tokenize_args;
  auto* tokenize = app.add_subcommand("tokenize", "Tokenize a corpus into one token file for training: slapo-lua "
                                                  "tokenize --tokenizer DIR --out tokens.bin FILES...");
  tokenize->add_option("--tokenizer", tokenize_args.tokenizer, "tokenizer.json, SentencePiece's tokenizer.model or spiece.model, or a checkpoint directory holding "
                      "one (or GPT-2's encoder.json and vocab.bpe)")
      ->required();
  tokenize->add_option("--out", tokenize_args.out, "the token file to write")->required();
  tokenize->add_option("--field", tokenize_args.field, "JSON-lines files: the field holding each document's text");
  tokenize->add_flag("--no-eos", tokenize_args.no_eos, "do not end each document with the end-of-text token");
  tokenize->add_option("files", tokenize_args.inputs, "text files (a document each) and .jsonl files (a document a line)")
      ->required();

  std::string repl_script;
  auto* repl = app.add_subcommand("repl", "Interactive prompt (libedit): slapo-lua repl [SCRIPT.lua]");
  repl->add_option("script", repl_script, "a script to run first");

  slapo::PlanArgs plan_args;
  auto* plan = app.add_subcommand("plan", "Plan TP x PP x DP, micro-batches, checkpointing and ZeRO for a model on a cluster; write it as Lua");
  plan->add_option("model", plan_args.model, "preset name or Hugging Face model directory")->required();
  plan->add_option("--cluster", plan_args.cluster, "NODESxDEVICES:DEVICE, DEVICE = cpu (measured now), h100 or a .json profile");
  plan->add_option("--batch", plan_args.batch, "sequences per step, over all replicas")->check(CLI::Range(1, 1 << 30));
  plan->add_option("--seq", plan_args.seq, "tokens per sequence")->check(CLI::Range(1, 1 << 24));
  plan->add_option("--documents", plan_args.documents,
                   "packed documents kept apart (position_ids), their mean length in tokens (0: a row is one sequence)")
      ->check(CLI::Range(0, 1 << 24));
  plan->add_option("--steps", plan_args.steps, "training steps the written script runs")->check(CLI::Range(1, 1 << 30));
  plan->add_option("--out", plan_args.out, "write the plan as a Lua schedule script here");
  plan->add_option("--dtype", plan_args.dtype, "training precision the cost model assumes")
      ->check(CLI::IsMember({"float32", "bfloat16"}));
  plan->add_option("--max-stages", plan_args.max_stages, "pipeline stages at most (1: no pipeline, 0: no limit)")
      ->check(CLI::Range(0, 1 << 20));
  plan->add_option("--from", plan_args.from,
                   "a schedule file (return function(sch) ... end, as sch:log() writes): its stage cuts, layer "
                   "checkpoints, shard and fully_shard calls are kept, the rest searched");
  plan->add_option("--pick", plan_args.pick, "write the script for this plan: a row of the table (its first column), a search's (grid, inter-op, alpa), or one written as the table writes plans, priced here (docs/planner.md)");
  plan->add_option("--layer-costs", plan_args.layer_costs,
                   "what prices each layer's tensor parallelism: ilp (the intra-op pass on one traced layer, per "
                   "mesh) or megatron (every projection sharded)")
      ->check(CLI::IsMember({"ilp", "megatron"}));

  slapo::ProfileDeviceArgs profile_args;
  auto* profile_device = app.add_subcommand("profile-device",
                                            "Measure this machine's device (matmul, attention, a layer, copies) for plan");
  profile_device->add_option("--device", profile_args.device, "cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}));
  profile_device->add_option("--threads", profile_args.threads, "CPU threads (default: LibTorch's; per rank: cores / ranks)")
      ->check(CLI::Range(0, 4096));
  profile_device->add_flag("--quick", profile_args.quick, "fewer, smaller shapes and shorter timing");
  profile_device->add_option("--ranks", profile_args.ranks,
                             "CPU: measure while ranks - 1 copies run the same profile (ranks sharing the machine)")
      ->check(CLI::Range(1, 256));
  profile_device->add_option("--out", profile_args.out, "write the profile here (devices/*.json's format)");

  slapo::TuneArgs tune_args;
  auto* tune = app.add_subcommand("tune", "Run a script once per configuration of its knobs: slapo-lua tune SCRIPT [-- ARGS]");
  tune->add_option("script", tune_args.script, "the Lua script; it declares its knobs with slapo.knob");
  tune->add_option("--nproc", tune_args.nproc, "ranks per trial (slapo-lua run --nproc)")->check(CLI::Range(1, 1024));
  tune->add_option("--budget", tune_args.budget, "run at most this many trials now (0: all); a later run goes on")
      ->check(CLI::Range(0, 1 << 30));
  tune->add_option("--db", tune_args.db, "the results, one JSON line per trial; measured configurations are skipped");
  tune->add_option("--search", tune_args.search,
                   "auto (guided when the script predicts, heuristic when a knob is monotone), exhaustive, heuristic "
                   "or guided (the best predicted first)")
      ->check(CLI::IsMember({"auto", "exhaustive", "heuristic", "guided"}));
  tune->add_option("--from-plan", tune_args.from_plan,
                   "run only the K plans the script's cost model (slapo-lua plan's) predicts fastest")
      ->check(CLI::Range(0, 1 << 20));
  tune->add_option("--timeout", tune_args.timeout, "seconds a trial may run before it is stopped")
      ->check(CLI::Range(1.0, 1e7));
  tune->add_option("--memory-mib", tune_args.memory_mib, "address-space limit per process of a trial (0: none)")
      ->check(CLI::Range(0.0, 1e9));
  tune->add_option("--show", tune_args.show, "print the leaderboard of this database instead of tuning");

  // `slapo-lua help [command]`, a bare `slapo-lua` (the REPL on a terminal, as `lua` does, else the
  // usage) and an unknown command are answered before CLI11, whose words for them name no command.
  if (argc == 1) {
    if (::isatty(STDIN_FILENO)) return slapo::cmd_repl("");
    fmt::print(stderr, "{}", app.help());
    return 2;
  }
  std::string first = argv[1];
  if (first == "help") {
    if (argc > 2) {
      for (auto* sub : app.get_subcommands({}))
        if (sub->get_name() == argv[2]) {
          fmt::print("{}", sub->help());
          return 0;
        }
    }
    fmt::print("{}", app.help());
    return argc > 2 ? 2 : 0;
  }
  if (first[0] != '-') {
    std::vector<std::string> names;
    for (auto* sub : app.get_subcommands({})) names.push_back(sub->get_name());
    if (std::find(names.begin(), names.end(), first) == names.end()) {
      auto close = slapo::closest_names(first, names);
      fmt::print(stderr, "slapo-lua: unknown command '{}'{} (commands: {}; slapo-lua help COMMAND describes one)\n",
                 first, close.empty() ? "" : fmt::format(" (did you mean '{}'?)", close[0]), fmt::join(names, ", "));
      return 2;
    }
  }

  bool is_tune = script_at < argc && std::string(argv[script_at]) == "--";
  try {
    app.parse(is_tune ? script_at : std::min(script_at + 1, argc), argv);
  } catch (const CLI::ExtrasError& e) {
    std::string hint = unknown_option_hint(app, argv[1], std::vector<std::string>(argv + 2, argv + std::min(
                                                                                    is_tune ? script_at : script_at + 1, argc)));
    if (hint.empty()) return app.exit(e) == 0 ? 0 : 2;
    fmt::print(stderr, "slapo-lua: {}\n", hint);
    return 2;
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  for (auto [cmd, launch] : {std::pair{run, &run_launch}, std::pair{test, &test_launch}}) {
    std::string error = *cmd ? launch_error(cmd->get_name(), *launch) : "";
    if (!error.empty()) {
      fmt::print(stderr, "slapo-lua: {}\n", error);
      return 2;
    }
  }
  if (*run && watch) {
    if (run_launch.nproc * run_launch.nnodes > 1) {
      fmt::print(stderr, "slapo-lua: run: --watch runs one process; it cannot be combined with --nproc {}{}\n",
                 run_launch.nproc, run_launch.multi_node() ? fmt::format(" --nnodes {}", run_launch.nnodes) : "");
      return 2;
    }
    return slapo::cmd_watch(script, script_args);
  }
  if (*run && !knob_values.empty()) {
    std::string error = slapo::set_knobs_env(knob_values);
    if (!error.empty()) {
      fmt::print(stderr, "slapo-lua: run: {}\n", error);
      return 2;
    }
  }
  if (*run) return slapo::cmd_run(script, script_args, run_launch, profile);
  if (*tune) {
    if (tune_args.show.empty() && tune_args.script.empty()) {
      fmt::print(stderr, "slapo-lua: tune: give a SCRIPT to tune, or --show DB\n");
      return 2;
    }
    if (is_tune) tune_args.args = script_args;
    return slapo::cmd_tune(tune_args);
  }
  if (*test) return slapo::cmd_test(test_paths, test_launch);
  if (*inspect) return slapo::cmd_inspect(model);
  if (*repl) return slapo::cmd_repl(repl_script);
  if (*plot) return slapo::cmd_plot(plot_args);
  if (*tokenize) return slapo::cmd_tokenize(tokenize_args);
  if (*plan) return slapo::cmd_plan(plan_args);
  if (*profile_device) return slapo::cmd_profile_device(profile_args);
  return 2;
}
