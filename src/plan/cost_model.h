// The planner's cost model: a device profile (matmul throughput by shape, memory), a cluster
// (nodes x devices with alpha-beta links), the shapes of a zoo model's layer, and the predicted
// step time and per-rank memory of one parallel plan. No Lua; testable from C++ alone.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "models/config.h"

namespace slapo::plan {

/// Matmul throughput measured by shape and dtype (devices/*.json's "matmul" rows), and capacity.
struct DeviceProfile {
  struct Matmul {
    std::string dtype;
    double m, k, n, tflops;
  };
  std::string name;
  std::vector<Matmul> matmul;
  double memory_bytes = 0;

  /// Seconds for m x k @ k x n: the throughput of the measured row of nearest shape (log scale).
  double matmul_seconds(double m, double k, double n, const std::string& dtype) const;
  /// devices/*.json (h100.json's format); `memory_bytes` as given (the file does not hold it).
  static DeviceProfile from_json(const nlohmann::json& j, const std::string& name, double memory_bytes);
  /// This machine's CPU, measured now with LibTorch (float32, transformer-like shapes, ~1 s).
  static DeviceProfile measure_cpu(int devices_per_node);
};

/// nodes x devices per node; links as alpha (s) + bytes / beta (bytes/s).
struct Cluster {
  int nodes = 1, per_node = 1;
  DeviceProfile device;
  double intra_bw = 0, intra_latency = 0, inter_bw = 0, inter_latency = 0;
  int devices() const { return nodes * per_node; }
  /// "1x2:cpu", "8x8:h100" or "2x4:path/to/profile.json"; named profiles are looked up in
  /// `devices_dir`. Errors name the option and the valid forms.
  static Cluster parse(const std::string& spec, const std::string& devices_dir);
};

/// Where named device profiles live: $SLAPO_DEVICES, else ../shared/devices beside the checkout.
std::string default_devices_dir();

/// Ring all-reduce of `bytes` over `ranks` devices: 2(n-1)/n of the data over the slowest link.
double all_reduce_seconds(double bytes, int ranks, double bandwidth, double latency);

/// The sizes of a zoo model that the cost depends on.
struct ModelShape {
  std::string type, name;
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, inner = 0, vocab = 0;
  bool gated_mlp = false;  // LLaMA-shaped: gate, up and down projections
  int64_t layer_params = 0, embedding_params = 0, total_params = 0;
  static ModelShape from_config(const ModelConfig& config, const std::string& name);
};

/// One uniform plan: tensor parallel x data parallel (no pipeline yet), activation checkpointing
/// of every layer or none, ZeRO-1 optimizer sharding over the data-parallel group.
struct Candidate {
  int tp = 1, dp = 1;
  bool checkpoint = false, zero = false;
};

struct Estimate {
  double compute_s = 0, tp_comm_s = 0, dp_comm_s = 0, step_s = 0;
  double param_bytes = 0, optimizer_bytes = 0, activation_bytes = 0, peak_bytes = 0;
  bool fits = false;
};

/// The workload: global batch (sequences per step) and sequence length, float32 training with AdamW.
struct Workload {
  int64_t batch = 8, seq = 128;
};

Estimate estimate(const ModelShape& model, const Cluster& cluster, const Workload& work, const Candidate& c);

}  // namespace slapo::plan
