// slapo-lua: the command line (run, test, inspect, --help, --version).
#include <CLI/CLI.hpp>

#include "host/commands.h"
#include "slapo/build_config.h"

int main(int argc, char** argv) {
  CLI::App app{"slapo-lua: schedule a LibTorch model from Lua without touching its definition", "slapo-lua"};
  app.set_version_flag("--version", std::string("slapo-lua ") + SLAPO_VERSION);
  app.require_subcommand(1);

  std::vector<std::string> run_args;
  auto* run = app.add_subcommand("run", "Run a Lua script: slapo-lua run SCRIPT.lua [ARGS...]");
  // Everything from the script name on belongs to the script, options included.
  run->prefix_command();
  run->add_option("script_and_args", run_args, "the script, then its arguments")->required();

  std::vector<std::string> test_paths;
  auto* test = app.add_subcommand("test", "Run Lua spec files (*_spec.lua) and must-fail scripts (errors/*.lua)");
  test->add_option("paths", test_paths, "spec files or directories")->required();

  std::string model;
  auto* inspect = app.add_subcommand("inspect", "Print a model's module tree (preset name, HF directory or .pt file)");
  inspect->add_option("model", model, "preset name, Hugging Face model directory or TorchScript .pt file")->required();

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }

  if (*run) {
    for (auto& extra : run->remaining()) run_args.push_back(extra);
    std::string script = run_args.front();
    return slapo::cmd_run(script, std::vector<std::string>(run_args.begin() + 1, run_args.end()));
  }
  if (*test) return slapo::cmd_test(test_paths);
  if (*inspect) return slapo::cmd_inspect(model);
  return 2;
}
