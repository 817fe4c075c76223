// Rendezvous and group creation over c10d's TCPStore (or FileStore for the one-machine launcher's
// ranks, which then listen on loopback only): ProcessGroupGloo for CPU tensors and, in
// CUDA builds of LibTorch with NCCL where every rank has its own GPU, ProcessGroupNCCL for CUDA
// tensors (PyTorch's "cpu:gloo,cuda:nccl").
#include "distributed/world.h"

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/csrc/distributed/c10d/HashStore.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if defined(SLAPO_WITH_TORCH_CUDA) && defined(USE_C10D_NCCL)
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define SLAPO_HAS_NCCL 1
#endif

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include "core/error.h"
#include "distributed/net_address.h"
#include "distributed/store_client.h"

namespace slapo::dist {

namespace {

struct State {
  std::mutex mutex;
  WorldOptions options;
  c10::intrusive_ptr<c10d::Store> store;
  std::vector<std::shared_ptr<Group>> groups;  // index = group id; 0 = world
  bool gloo = true;   // groups of several ranks get Gloo for CPU tensors
  bool nccl = false;  // ... and NCCL for CUDA tensors (agreed by every rank at init)
};

State& state() {
  static State s;
  return s;
}

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  if (!v || !*v) return fallback;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end != '\0') throw Error(fmt::format("dist: environment variable {}='{}' is not an integer", name, v));
  return static_cast<int>(n);
}

// This host's address toward the master (once per process: every group binds the same one).
std::string gloo_address(const WorldOptions& o) {
  static std::string address;
  if (address.empty()) {
    try {
      address = source_address_toward(o.master_addr);
    } catch (const std::exception& e) {
      throw Error(fmt::format("dist: rank {} cannot choose Gloo's address toward MASTER_ADDR={}: {} (GLOO_SOCKET_IFNAME "
                              "names an interface instead)",
                              o.rank, o.master_addr, e.what()));
    }
  }
  return address;
}

c10::intrusive_ptr<CollectiveBackend> make_gloo(const std::string& prefix, int rank, int size) {
  auto& s = state();
  auto opts = c10d::ProcessGroupGloo::Options::create(s.options.timeout);
  // GLOO_SOCKET_IFNAME (as PyTorch reads it) names the interface; else local runs bind to
  // loopback and multi-node runs to this host's address on the route to the master, never to
  // every interface.
  const char* ifname = std::getenv("GLOO_SOCKET_IFNAME");
  if (ifname && *ifname) opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
  else if (is_loopback(s.options.master_addr))
    opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
  else opts->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(gloo_address(s.options)));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(c10::make_intrusive<c10d::PrefixStore>(prefix, s.store), rank,
                                                     size, opts);
}

// NCCL for CUDA tensors: each rank uses the GPU LOCAL_RANK names (as torchrun sets it).
c10::intrusive_ptr<CollectiveBackend> make_nccl(const std::string& prefix, int rank, int size) {
#ifdef SLAPO_HAS_NCCL
  auto& s = state();
  auto opts = c10d::ProcessGroupNCCL::Options::create();
  opts->timeout = s.options.timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(c10::make_intrusive<c10d::PrefixStore>(prefix, s.store), rank,
                                                     size, opts);
#else
  (void)prefix, (void)rank, (void)size;
  throw Error("dist: SLAPO_DIST_BACKEND=nccl, but this build has no NCCL (build against a CUDA LibTorch with NCCL, "
              "as pip's torch on the GPU machines); choices here: auto, gloo");
#endif
}

// This rank's GPU, where NCCL takes its tensors.
at::Device local_gpu(const WorldOptions& o) { return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(o.local_rank)); }

// A group's backends: Gloo for CPU tensors, NCCL for CUDA tensors, as the world agreed. One rank
// needs no communication, but NCCL asked for by name runs anyway: on a machine with one GPU that
// is the only way to run NCCL's own code path (two ranks may not share a GPU).
std::shared_ptr<Group> make_group(int id, int rank, const std::vector<int>& ranks) {
  auto& s = state();
  int size = static_cast<int>(ranks.size());
  bool forced_nccl = s.options.backend == "nccl";
  c10::intrusive_ptr<CollectiveBackend> cpu, cuda;
  if (rank >= 0 && (size > 1 || forced_nccl)) {
    std::string prefix = id == 0 ? "world" : fmt::format("group{}", id);
    if (s.gloo) cpu = make_gloo(prefix + "/gloo", rank, size);
    if (s.nccl) cuda = make_nccl(prefix + "/nccl", rank, size);
  }
  at::Device device = cuda ? local_gpu(s.options) : at::Device(at::kCPU);
  return std::make_shared<Group>(id, rank, ranks, cpu, cuda, device);
}

// NCCL: this process works on the GPU LOCAL_RANK names (torchrun's variable; the launcher sets it).
void use_local_gpu(const WorldOptions& o) {
#ifdef SLAPO_HAS_NCCL
  int count = static_cast<int>(c10::cuda::device_count());
  if (o.local_rank >= count)
    throw Error(fmt::format("dist: NCCL rank {} needs GPU {} (LOCAL_RANK), but this machine has {} GPU{}; NCCL cannot "
                            "put two ranks on one GPU, so run at most {} rank{} per machine",
                            o.rank, o.local_rank, count, count == 1 ? "" : "s", count, count == 1 ? "" : "s"));
  c10::cuda::set_device(static_cast<c10::DeviceIndex>(o.local_rank));
#else
  (void)o;
#endif
}

// auto: NCCL joins Gloo when this is a CUDA build and every rank has its own GPU. Each rank says
// what it can through the store, so all make the same choice (a rank choosing alone could
// pair an NCCL collective with another rank's Gloo one).
bool every_rank_has_a_gpu(const WorldOptions& o) {
#ifdef SLAPO_HAS_NCCL
  auto& s = state();
  bool mine = static_cast<int>(c10::cuda::device_count()) > o.local_rank;
  auto key = [](int r) { return fmt::format("slapo/has_gpu/{}", r); };
  s.store->set(key(o.rank), std::vector<uint8_t>{static_cast<uint8_t>(mine)});
  bool all = true;
  for (int r = 0; r < o.world_size; ++r) all = all && s.store->get(key(r)).at(0) != 0;
  return all;
#else
  (void)o;
  return false;
#endif
}

// The rendezvous store every group's connections are set up through.
c10::intrusive_ptr<c10d::Store> open_store(const WorldOptions& options) {
  if (!options.store_file.empty()) {
    try {
      auto store = c10::make_intrusive<c10d::FileStore>(options.store_file, options.world_size);
      store->setTimeout(options.timeout);
      return store;
    } catch (const std::exception& e) {
      throw Error(fmt::format("dist: rank {} could not open the store file '{}' (SLAPO_STORE_FILE): {}", options.rank,
                              options.store_file, e.what()));
    }
  }
  if (options.launcher_store) {
    try {
      auto store = c10::make_intrusive<StoreClient>(options.master_addr, options.master_port, options.timeout);
      // beside the launchers' own keys, and apart from an earlier attempt's before a restart
      return c10::make_intrusive<c10d::PrefixStore>(fmt::format("ranks/{}", options.restart_count), store);
    } catch (const std::exception& e) {
      throw Error(fmt::format("dist: rank {} could not reach the launcher's store: {}", options.rank, e.what()));
    }
  }
  c10d::TCPStoreOptions so;
  so.port = static_cast<uint16_t>(options.master_port);
  so.isServer = options.rank == 0 && !options.agent_store;
  so.numWorkers = options.world_size;
  so.timeout = options.timeout;
  try {
    return c10::make_intrusive<c10d::TCPStore>(options.master_addr, so);
  } catch (const std::exception& e) {
    throw Error(fmt::format("dist: rank {} could not reach the store at {}:{} within {} s: {}", options.rank,
                            options.master_addr, options.master_port, options.timeout.count() / 1000, e.what()));
  }
}

}  // namespace

std::chrono::seconds timeout_from_env() { return std::chrono::seconds(env_int("SLAPO_DIST_TIMEOUT", 120)); }

WorldOptions options_from_env() {
  WorldOptions o;
  o.world_size = env_int("WORLD_SIZE", 1);
  o.rank = env_int("RANK", 0);
  o.local_rank = env_int("LOCAL_RANK", o.rank);
  o.local_world_size = env_int("LOCAL_WORLD_SIZE", o.world_size);
  if (o.local_world_size < 1 || o.local_world_size > o.world_size || o.local_rank < 0 ||
      o.local_rank >= o.local_world_size)
    throw Error(fmt::format("dist: LOCAL_RANK={} and LOCAL_WORLD_SIZE={} do not fit a world of WORLD_SIZE={} (valid: "
                            "0 <= LOCAL_RANK < LOCAL_WORLD_SIZE <= WORLD_SIZE)",
                            o.local_rank, o.local_world_size, o.world_size));
  o.node_rank = env_int("GROUP_RANK", o.rank / o.local_world_size);
  if (const char* addr = std::getenv("MASTER_ADDR")) o.master_addr = addr;
  o.master_port = env_int("MASTER_PORT", 29500);
  if (const char* file = std::getenv("SLAPO_STORE_FILE")) o.store_file = file;
  o.launcher_store = std::getenv("SLAPO_LAUNCHER_STORE") != nullptr;
  o.restart_count = env_int("TORCHELASTIC_RESTART_COUNT", 0);
  if (const char* agent = std::getenv("TORCHELASTIC_USE_AGENT_STORE")) o.agent_store = std::string(agent) == "True";
  o.timeout = timeout_from_env();
  if (const char* backend = std::getenv("SLAPO_DIST_BACKEND")) o.backend = backend;
  if (o.backend != "auto" && o.backend != "gloo" && o.backend != "nccl")
    throw Error(fmt::format("dist: SLAPO_DIST_BACKEND='{}' is not a backend (choices: auto, gloo, nccl)", o.backend));
  if (o.world_size < 1) throw Error(fmt::format("dist: WORLD_SIZE={} must be at least 1", o.world_size));
  if (o.rank < 0 || o.rank >= o.world_size)
    throw Error(fmt::format("dist: RANK={} is outside the world of WORLD_SIZE={} (valid: 0 .. {})", o.rank, o.world_size,
                            o.world_size - 1));
  return o;
}

bool initialized() { return !state().groups.empty(); }

void shutdown() {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  for (auto& group : s.groups)
    if (group) group->shutdown();
  s.groups.clear();
  s.store.reset();
}

namespace {
// Registered after init has touched CUDA, so it runs before the CUDA runtime's own exit handler
// (atexit runs last-registered first), and before State's destructor.
void shutdown_at_exit() {
  try {
    shutdown();
  } catch (const std::exception& e) {
    fmt::print(stderr, "slapo-lua: leaving the process group at exit: {}\n", e.what());
  }
}
void shutdown_at_exit_once() {
  static bool registered = false;
  if (!registered) registered = std::atexit(shutdown_at_exit) == 0;
}
}  // namespace

const WorldOptions& options() { return state().options; }

std::string device() {
  if (!initialized()) return "cpu";  // a world of one joined lazily is Gloo's
  return world()->device().str();
}

void init(const WorldOptions& options) {
  auto& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (!s.groups.empty()) return;
  s.options = options;
  s.gloo = options.backend != "nccl";
  s.nccl = options.backend == "nccl";
  std::vector<int> all(options.world_size);
  for (int i = 0; i < options.world_size; ++i) all[i] = i;
  if (s.nccl) use_local_gpu(options);
  if (options.world_size == 1) {
    // no communication; NCCL asked for by name runs on one rank over an in-process store
    if (s.nccl) s.store = c10::make_intrusive<c10d::HashStore>();
    s.groups.push_back(make_group(0, 0, all));
    shutdown_at_exit_once();
    return;
  }
  s.store = open_store(options);
  if (options.backend == "auto" && every_rank_has_a_gpu(options)) {
    s.nccl = true;
    use_local_gpu(options);
  }
  s.groups.push_back(make_group(0, options.rank, all));
  shutdown_at_exit_once();
}

std::shared_ptr<Group> world() {
  if (!initialized()) init(WorldOptions{});
  return state().groups[0];
}

std::shared_ptr<Group> new_group(const std::vector<int>& ranks) {
  auto w = world();
  auto& s = state();
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.empty()) throw Error("dist.new_group: the rank list is empty");
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (sorted[i] < 0 || sorted[i] >= w->size())
      throw Error(fmt::format("dist.new_group: rank {} is outside the world of {} ranks (valid: 0 .. {})", sorted[i],
                              w->size(), w->size() - 1));
    if (i > 0 && sorted[i] == sorted[i - 1]) throw Error(fmt::format("dist.new_group: rank {} is listed twice", sorted[i]));
  }
  std::lock_guard<std::mutex> lock(s.mutex);
  int id = static_cast<int>(s.groups.size());
  auto me = std::find(ranks.begin(), ranks.end(), w->rank());
  int rank = me == ranks.end() ? -1 : static_cast<int>(me - ranks.begin());
  s.groups.push_back(make_group(id, rank, ranks));
  return s.groups.back();
}

std::shared_ptr<Group> group_by_id(int id) {
  auto& s = state();
  if (id < 0 || id >= static_cast<int>(s.groups.size())) throw Error(fmt::format("dist: no group with id {}", id));
  return s.groups[id];
}

}  // namespace slapo::dist
