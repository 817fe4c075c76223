// slapo-lua plan MODEL --cluster NxD:DEVICE --batch B --seq S [--out plan.lua]: the planner's
// table on stdout and its plan as a Lua schedule script.
#include <filesystem>
#include <fstream>

#include "core/error.h"
#include "host/commands.h"
#include "io/json_file.h"
#include "plan/layer_layouts.h"
#include "plan/planner.h"
#include "plan/profile_device.h"

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
    plan::Workload work{a.batch, a.seq, a.dtype};
    auto pricing = plan::price_layers(a.layer_costs, config, shape, cluster, work);
    shape.layouts = pricing.layouts;
    auto result = plan::plan_parallel(shape, cluster, work, {a.max_stages, true});
    if (!a.pick.empty()) result.pick(a.pick);
    plan::lay_out_layers(result, pricing);
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

int cmd_profile_device(const ProfileDeviceArgs& a) {
  try {
    plan::ProfileOptions o;
    o.device = a.device, o.threads = a.threads, o.quick = a.quick;
    auto j = plan::profile_device(o);
    fmt::print("device: {} (LibTorch {})\n", j["device"].get<std::string>(), j["torch"].get<std::string>());
    fmt::print("| matmul m x k x n | dtype | TFLOP/s |\n|---|---|---|\n");
    for (auto& row : j["matmul"])
      fmt::print("| {} x {} x {} | {} | {:.3f} |\n", row["m"].get<int64_t>(), row["k"].get<int64_t>(),
                 row["n"].get<int64_t>(), row["dtype"].get<std::string>(), row["tflops"].get<double>());
    for (auto& row : j["attention"])
      fmt::print("attention seq {} heads {} head_dim {}: {:.3f} TFLOP/s forward + backward\n", row["seq"].get<int64_t>(),
                 row["heads"].get<int64_t>(), row["head_dim"].get<int64_t>(), row["tflops"].get<double>());
    for (auto& row : j["layer"])
      fmt::print("transformer layer width {}: {:.3f} TFLOP/s forward + backward\n", row["hidden"].get<int64_t>(),
                 row["tflops"].get<double>());
    fmt::print("copy: {:.1f} GB/s\n", j["copy_GBps"].get<double>());
    if (!a.out.empty()) {
      std::ofstream file(a.out);
      if (!file) throw Error(fmt::format("profile-device: cannot write '{}'", a.out));
      file << j.dump(1) << "\n";
      fmt::print("wrote {}: slapo-lua plan MODEL --cluster 1x2:{}\n", a.out, a.out);
    }
  } catch (const std::exception& e) {
    report_error(e.what());
    return 1;
  }
  return 0;
}

}  // namespace slapo
