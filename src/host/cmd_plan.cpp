// slapo-lua plan MODEL --cluster NxD:DEVICE --batch B --seq S [--out plan.lua]: the planner's
// table on stdout and its plan as a Lua schedule script.
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "core/child_process.h"
#include "core/data_dirs.h"
#include "core/error.h"
#include "distributed/group.h"
#include "distributed/link_profile.h"
#include "distributed/world.h"
#include "host/commands.h"
#include "host/launcher.h"
#include "lua/plan_record.h"
#include "plan/planner.h"
#include "plan/profile_device.h"

namespace slapo {

int cmd_plan(const PlanArgs& a) {
  try {
    plan::PlanRequest request;
    request.model = a.model, request.cluster = a.cluster, request.work = {a.batch, a.seq, a.dtype, a.documents};
    request.search.max_stages = a.max_stages, request.pick = a.pick, request.layer_costs = a.layer_costs;
    std::vector<std::string> unpriced;
    if (!a.from.empty()) request.pins = pins_from_schedule_file(a.model, a.from, unpriced);
    auto result = plan::make_plan(request);
    fmt::print("{}", result.summary());
    for (auto& what : unpriced) fmt::print("  applied in {}, not priced: {}\n", a.from, what);
    if (!a.out.empty()) {
      std::ofstream(a.out) << write_plan_script(result, a.steps);
      fmt::print("wrote {}: {} run --nproc {} {}\n", a.out, program_name(), result.cluster.devices(), a.out);
    }
  } catch (const std::exception& e) {
    report_error(e.what());
    return 1;
  }
  return 0;
}

namespace {
// Set in the copies profile-device --ranks starts: they join their parent's world for the links.
constexpr const char* kPeerVariable = "SLAPO_PROFILE_PEER";

// Starts `count` copies of this profile (their output discarded), so the measurement sees the
// other ranks of a plan competing for the cores and the memory bus; afterwards they join a Gloo
// world of count + 1 ranks at `port` (this process rank 0) to time all-reduces. Returns their pids.
std::vector<pid_t> start_rank_copies(const ProfileDeviceArgs& a, int count, int port) {
  std::vector<std::string> args = {"slapo-lua", "profile-device", "--device", a.device, "--out", "/dev/null"};
  if (a.threads > 0) args.insert(args.end(), {"--threads", std::to_string(a.threads)});
  if (a.quick) args.push_back("--quick");
  std::vector<pid_t> pids;
  for (int i = 0; i < count; ++i) {
    ChildSpec spec;
    spec.program = "/proc/self/exe", spec.argv = args, spec.discard_output = true;
    spec.unset = {"LOCAL_WORLD_SIZE", "GROUP_RANK", "SLAPO_STORE_FILE", "SLAPO_LAUNCHER_STORE"};
    spec.env = {{"RANK", std::to_string(i + 1)}, {"LOCAL_RANK", std::to_string(i + 1)},
                {"WORLD_SIZE", std::to_string(count + 1)}, {"MASTER_ADDR", "127.0.0.1"},
                {"MASTER_PORT", std::to_string(port)}, {"SLAPO_DIST_BACKEND", "gloo"}, {kPeerVariable, "1"}};
    try {
      pids.push_back(start_child(spec, "profile-device"));
    } catch (const Error&) {
      break;  // counted below
    }
  }
  if (static_cast<int>(pids.size()) != count) {
    for (pid_t pid : pids) ::kill(pid, SIGKILL), ::waitpid(pid, nullptr, 0);
    throw Error(fmt::format("profile-device: --ranks {}: could start only {} of {} copies", count + 1, pids.size(), count));
  }
  return pids;
}

struct MeasuredLinks {
  dist::LinkMeasurement links;
  dist::OverlapMeasurement overlap;
};

// Rank `rank` of the profile's world: all-reduces among its ranks, fitted to alpha-beta, and how
// much of a gather hides behind compute.
MeasuredLinks measure_links(int rank, int ranks, int port, bool quick) {
  dist::WorldOptions w;
  w.rank = rank, w.local_rank = rank, w.world_size = ranks, w.master_port = port, w.backend = "gloo";
  w.timeout = dist::timeout_from_env();
  dist::init(w);
  MeasuredLinks out;
  out.links = dist::measure_all_reduce_links(*dist::world(), quick);
  out.overlap = dist::measure_gather_overlap(*dist::world(), quick);
  return out;
}
}  // namespace

int cmd_profile_device(const ProfileDeviceArgs& a) {
  std::vector<pid_t> copies;
  auto reap = [&copies] {
    for (pid_t pid : copies) ::waitpid(pid, nullptr, 0);
    copies.clear();
  };
  try {
    plan::ProfileOptions o;
    o.device = a.device, o.threads = a.threads, o.quick = a.quick;
    if (a.ranks > 1 && a.device != "cpu")
      throw Error("profile-device: --ranks measures ranks sharing a CPU; each GPU is its own device (use --device cpu)");
    if (std::getenv(kPeerVariable)) {  // a copy started below: the profile, then the links with its parent
      plan::profile_device(o);
      auto w = dist::options_from_env();
      measure_links(w.rank, w.world_size, w.master_port, a.quick);
      return 0;
    }
    const int port = a.ranks > 1 ? free_port() : 0;
    if (a.ranks > 1) copies = start_rank_copies(a, a.ranks - 1, port);
    auto j = plan::profile_device(o);
    if (a.ranks > 1) {
      auto [links, overlap] = measure_links(0, a.ranks, port, a.quick);
      auto& l = j["links"];
      l["intra_GBps"] = links.bandwidth_Bps / 1e9;
      l["intra_latency_us"] = links.latency_s * 1e6;
      l["source"] = fmt::format("intra: Gloo all-reduces among the {} ranks of this profile, measured; inter: {}",
                                a.ranks, l["source"].get<std::string>());
      l["all_reduce"] = nlohmann::json::array();
      for (auto& row : links.rows) l["all_reduce"].push_back({{"bytes", row.bytes}, {"s", row.seconds}});
      // what the planner hides behind compute of fully_shard's prefetched gathers
      l["overlap"] = overlap.overlap;
      l["overlap_measured"] = {{"gather_s", overlap.gather_s}, {"compute_s", overlap.compute_s},
                               {"both_s", overlap.both_s}};
    }
    reap();
    if (a.ranks > 1) j["device"] = fmt::format("{}, beside {} more", j["device"].get<std::string>(), a.ranks - 1);
    j["ranks"] = a.ranks;
    fmt::print("device: {} (LibTorch {})\n", j["device"].get<std::string>(), j["torch"].get<std::string>());
    fmt::print("| matmul m x k x n | dtype | TFLOP/s |\n|---|---|---|\n");
    for (auto& row : j["matmul"])
      fmt::print("| {} x {} x {} | {} | {:.3g} |\n", row["m"].get<int64_t>(), row["k"].get<int64_t>(),
                 row["n"].get<int64_t>(), row["dtype"].get<std::string>(), row["tflops"].get<double>());
    for (auto& row : j["attention"])
      fmt::print("attention seq {} heads {} head_dim {}: {:.3g} TFLOP/s forward + backward\n", row["seq"].get<int64_t>(),
                 row["heads"].get<int64_t>(), row["head_dim"].get<int64_t>(), row["tflops"].get<double>());
    for (auto& row : j["layer"])
      fmt::print("transformer layer width {}: {:.3g} TFLOP/s forward + backward\n", row["hidden"].get<int64_t>(),
                 row["tflops"].get<double>());
    fmt::print("copy: {:.1f} GB/s\n", j["copy_GBps"].get<double>());
    if (a.ranks > 1)
      fmt::print("links: all-reduce among {} ranks: {:.2f} GB/s, {:.0f} us per ring step; a gather beside "
                 "compute hides {:.0f}% of the shorter\n", a.ranks, j["links"]["intra_GBps"].get<double>(),
                 j["links"]["intra_latency_us"].get<double>(), 100 * j["links"]["overlap"].get<double>());
    if (!a.out.empty()) {
      std::ofstream file(a.out);
      if (!file) throw Error(fmt::format("profile-device: cannot write '{}'", a.out));
      file << j.dump(1) << "\n";
      fmt::print("wrote {}: {} plan MODEL --cluster 1x2:{}\n", a.out, program_name(), a.out);
    }
  } catch (const std::exception& e) {
    for (pid_t pid : copies) ::kill(pid, SIGTERM);
    reap();
    report_error(e.what());
    return 1;
  }
  return 0;
}

}  // namespace slapo
