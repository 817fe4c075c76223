// slapo-lua plan MODEL --cluster NxD:DEVICE --batch B --seq S [--out plan.lua]: the planner's
// table on stdout and its plan as a Lua schedule script.
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "host/commands.h"
#include "io/json_file.h"
#include "plan/planner.h"

namespace slapo {

namespace {

// A preset name, or a Hugging Face directory's config.json.
ModelConfig config_of(const std::string& model) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(model)) return ModelConfig::preset(model);
  return ModelConfig(read_json_file((fs::path(model) / "config.json").string(), "plan"));
}

}  // namespace

int cmd_plan(const PlanArgs& a) {
  try {
    auto config = config_of(a.model);
    auto shape = plan::ModelShape::from_config(config, a.model);
    auto cluster = plan::Cluster::parse(a.cluster, plan::default_devices_dir());
    auto result = plan::plan_uniform(shape, cluster, {a.batch, a.seq});
    // the script runs from anywhere (a tuner's trials, another directory): the absolute path
    if (std::filesystem::is_directory(a.model))
      result.model_source = nlohmann::json(std::filesystem::absolute(a.model).lexically_normal().string()).dump();
    fmt::print("{}", result.summary());
    if (!a.out.empty()) {
      std::ofstream(a.out) << result.lua_source(a.steps);
      fmt::print("wrote {}: slapo-lua run --nproc {} {}\n", a.out, cluster.devices(), a.out);
    }
  } catch (const std::exception& e) {
    report_error(e.what());
    return 1;
  }
  return 0;
}

}  // namespace slapo
