// The planner's cost model: a device profile (matmul throughput by shape, memory), a cluster
// (nodes x devices with alpha-beta links), the shapes of a zoo model's layer, and the predicted
// step time and per-rank memory of one parallel plan. No Lua; testable from C++ alone.
#pragma once

#include <nlohmann/json.hpp>

#include <memory>
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
  /// A CPU: its ranks talk through Gloo, which has no reduce-scatter or fast all-gather, so ZeRO-1
  /// runs both as all-reduces (train/zero_adamw.cpp)
  bool host = false;
  std::vector<Matmul> matmul;
  double memory_bytes = 0;
  double copy_bytes_per_s = 0;  ///< memory bandwidth (bytes read + written): the optimizer's pace; 0 unknown
  /// A whole transformer layer timed forward + backward (devices/*.json's "layer" rows).
  struct Layer {
    std::string dtype;
    double hidden, heads, tokens, seq, fwd_bwd_s;
  };
  std::vector<Layer> layers;

  /// Seconds for m x k @ k x n: the throughput of the measured row of nearest shape (log scale).
  double matmul_seconds(double m, double k, double n, const std::string& dtype) const;
  /// The measured layer of nearest width over the time the model gives its matmuls at the same
  /// shapes: what norms, softmax, activations, dropout and the host add, less what fused kernels
  /// save. Megatron's fifth, 1.2, when the profile measured no layer in `dtype`.
  double layer_overhead(double hidden, const std::string& dtype) const;
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
  /// Of compute running while a collective is in flight, the part the collective hides behind
  /// (0..1): a profile's links.overlap (profile-device --ranks measures it); else none on a CPU
  /// (Gloo's thread shares the rank's cores) and all on a GPU (NCCL's own stream; assumed)
  double overlap = 0;
  int devices() const { return nodes * per_node; }
  /// "1x2:cpu", "8x8:h100" or "2x4:path/to/profile.json"; named profiles are looked up in
  /// `devices_dir`. Errors name the option and the valid forms.
  static Cluster parse(const std::string& spec, const std::string& devices_dir);
};

/// Ring all-reduce of `bytes` over `ranks` devices: 2(n-1)/n of the data over the slowest link.
double all_reduce_seconds(double bytes, int ranks, double bandwidth, double latency);

/// How one layer lays out over the tensor-parallel ranks of a tp x dp mesh, as fractions of its
/// whole: the matmul work, parameters and saved activations the ranks divide, and how many
/// activation-sized (tokens x hidden) all-reduces it runs in forward and in backward.
struct TpLayout {
  double split_compute = 1, split_params = 1;
  double split_activations = -1;  ///< -1: Megatron's, sbh(10 + 24/t + 5as/(ht)) of sbh(34 + 5as/h)
  double forward_all_reduces = 2, backward_all_reduces = 2;
  /// Megatron's layout: every projection sharded, one all-reduce after attention and after the MLP
  /// in forward, one before each in backward.
  static TpLayout megatron() { return {}; }
};

/// The layer layouts of a model, by mesh: the intra-op pass's (layer_layouts.h), or none.
class LayerLayouts {
 public:
  virtual ~LayerLayouts() = default;
  /// The layout on tp x dp ranks (tp >= 2), with the layer's tokens split over the tp ranks
  /// between its projections (`sequence`: Megatron's sequence parallelism) or not; safe to call
  /// from the search's threads.
  virtual TpLayout on(int tp, int dp, bool sequence) const = 0;
};

/// The sizes of a zoo model that the cost depends on.
struct ModelShape {
  std::string type, name;
  int64_t hidden = 0, layers = 0, heads = 0, kv_heads = 0, head_dim = 0, inner = 0, vocab = 0;
  bool gated_mlp = false;  // LLaMA-shaped: gate, up and down projections
  bool tied_head = true;   // the LM head is the token embedding's matrix
  int64_t head_width = 0;  // the head's input width: ALBERT's embedding_size, else hidden
  /// Attention sublayers a layer runs, on average: T5's decoder layers add cross-attention
  double attention_blocks = 1;
  /// layer_params: a layer's share of the model's layer parameters (T5: the mean of its encoder and
  /// decoder layers; ALBERT: its shared groups over the layers that run them). gathered_params:
  /// what fully sharding gathers for one layer's call (ALBERT: one layer of the shared group).
  int64_t layer_params = 0, gathered_params = 0, embedding_params = 0, total_params = 0;
  /// Why no pipeline cuts this model (T5's decoder reads the encoder's output in every layer,
  /// ALBERT's layers share their parameters); empty where pipelines are planned
  std::string one_stage_reason;
  /// A mixture of experts (Mixtral): each layer's MLP is `experts` SwiGLU experts of width `inner`,
  /// of which a token's router picks `experts_per_token`; `expert_params` is one layer's experts
  /// together (in layer_params, the router's matrix not). 0 experts: a dense model.
  int64_t experts = 0, experts_per_token = 0, expert_params = 0;
  /// Whether sch:context_parallel splits its sequences (LLaMA, Qwen2 and Mistral without attention
  /// dropout or dynamic rotary scaling, GPT-2 with attn_pdrop 0): the grid then offers cp
  bool context_parallel = false;
  /// How a layer splits on each mesh; null: Megatron's layout everywhere.
  std::shared_ptr<const LayerLayouts> layouts;
  TpLayout layout_on(int tp, int dp, bool sequence = false) const {
    return layouts && tp > 1 ? layouts->on(tp, dp, sequence) : TpLayout::megatron();
  }
  /// Sequence parallelism is a choice on tp ranks when the pass prices layers and they divide
  /// the sequence.
  bool sequence_parallel_on(int tp, int64_t seq) const { return layouts && tp > 1 && seq % tp == 0; }
  static ModelShape from_config(const ModelConfig& config, const std::string& name);
};

/// The workload: global batch (sequences per step), sequence length and precision: "float32", or
/// "bfloat16" (bf16 weights, activations and gradients; float32 master weights and AdamW moments).
struct Workload {
  int64_t batch = 8, seq = 128;
  std::string dtype = "float32";
  /// Packed documents kept apart (position_ids), their mean length in tokens; 0: each row is one
  /// sequence. Context parallelism's attention leaves out the pieces between documents.
  int64_t documents = 0;
};

/// One pipeline stage: `layers` consecutive transformer layers (the embedding rides on the first
/// stage, the LM head on the last) on a submesh of tp x dp devices.
struct Stage {
  int layers = 0, tp = 1, dp = 1;
  bool checkpoint = false, zero = false;
  bool sequence = false;  ///< the layers' tokens split over the tp ranks (the pass's layout)
  /// Fully sharded over the dp replicas (fully_shard, ZeRO-3): each rank keeps 1/dp of the
  /// weights, gradients and AdamW state, and gathers each layer for its forward and backward
  bool fully_sharded = false;
  /// With fully_sharded: each layer's weights kept whole from its forward to its backward
  /// (fully_shard{reshard_after_forward = false}, FSDP's SHARD_GRAD_OP: ZeRO-2), one gather a call
  bool keep_gathered = false;
  /// Expert parallelism: each MoE layer's experts spread over groups of `ep` replicas (dividing dp),
  /// tokens sent to their experts' ranks and back by all-to-all; experts averaged over dp / ep
  int ep = 1;
  /// Context parallelism: each sequence split over groups of `cp` replicas (dividing dp) that take
  /// the same rows, attention by ring attention (keys and values passed around the group) or by
  /// all-to-all (cp_all_to_all)
  int cp = 1;
  /// With cp > 1: attention by Ulysses' all-to-all over heads (each rank every token of 1/cp of
  /// the heads) in place of the ring
  bool cp_all_to_all = false;
};

/// One plan: tensor parallel x data parallel, activation checkpointing of every layer or none,
/// ZeRO-1 optimizer sharding over the data-parallel group; with `stages`, a 1F1B pipeline of
/// `micro_batches` micro-batches whose stages may each have their own layers, mesh and
/// checkpointing (Alpa's inter-op plans).
struct Candidate {
  int tp = 1, dp = 1;
  bool checkpoint = false, zero = false;
  int micro_batches = 1;
  std::vector<Stage> stages;  ///< in order; empty: one stage of every layer on tp x dp
  bool sequence = false;      ///< sequence parallelism in every layer (tp > 1)
  bool fully_sharded = false; ///< fully_shard over the dp replicas, in every stage (not with zero)
  bool keep_gathered = false; ///< with fully_sharded: reshard_after_forward = false (ZeRO-2)
  int ep = 1;  ///< experts spread over groups of ep replicas (Stage::ep), in every stage
  int cp = 1;  ///< sequences split over groups of cp replicas (Stage::cp), in every stage of one rank layout
  bool cp_all_to_all = false;  ///< with cp > 1: Ulysses' all-to-all in place of the ring (Stage::cp_all_to_all)
  int pp() const { return stages.empty() ? 1 : static_cast<int>(stages.size()); }
  /// Every stage on the candidate's tp x dp with its ZeRO, sequence parallelism and fully sharded
  /// settings: what one rank layout (and the pipeline script's one `plan.sequence`) runs.
  bool uniform_mesh() const;
  int devices() const;
  /// ", fully sharded", ", zero-2" (fully sharded, kept gathered) or nothing: the name's part.
  const char* sharded_name() const;
  /// The stages, or the single stage the fields describe.
  std::vector<Stage> resolved(int layers) const;
  /// "tp 2 x dp 1 x pp 2 (12+12 layers), 8 micro-batches, checkpoint"
  std::string describe() const;
};

struct StageEstimate {
  double compute_s = 0, tp_comm_s = 0, p2p_s = 0;  ///< per micro-batch; p2p: stage boundaries and cp's exchanges
  double ep_comm_s = 0;  ///< per micro-batch: the experts' all-to-all exchanges
  double sync_s = 0, optimizer_s = 0;                 ///< once a step: gradient sync, AdamW's update
  double param_bytes = 0, optimizer_bytes = 0, activation_bytes = 0, peak_bytes = 0;
  double update_bytes = 0;  ///< the optimizer step's temporaries, held once the activations are gone
  /// the end of backward: the vocabulary matrix's new gradient (and a tied head's, held through
  /// backward, and their sum) beside the kept one, the activations gone
  double tail_bytes = 0;
  double time_s() const { return compute_s + tp_comm_s + p2p_s + ep_comm_s; }
  double once_s() const { return sync_s + optimizer_s; }
};

/// The step: sum of the stages' micro-batch times + (micro-batches - 1) x the slowest (1F1B), then
/// the slowest stage's gradient sync and AdamW update. Memory is the stage with the highest peak's.
struct Estimate {
  double compute_s = 0, tp_comm_s = 0, p2p_s = 0, dp_comm_s = 0, optimizer_s = 0, step_s = 0;
  double ep_comm_s = 0;  ///< the experts' all-to-all exchanges (StageEstimate::ep_comm_s)
  double param_bytes = 0, optimizer_bytes = 0, activation_bytes = 0, peak_bytes = 0;
  bool fits = false;
  std::vector<StageEstimate> stages;
};

/// What one transformer layer, the head and a stage boundary cost on a tp x dp submesh for one
/// micro-batch of `micro_batch` sequences: the pieces every stage's estimate is built from.
struct LayerCosts {
  double layer_fwd_s = 0, head_fwd_s = 0, tp_all_reduce_s = 0;
  double forward_all_reduces = 2, backward_all_reduces = 2;  ///< per layer (TpLayout)
  double layer_param_share = 1;  ///< of a layer's parameters, the part one rank holds
  /// Of a layer's experts, the part one rank holds: its 1/ep of them, each split as the layer is
  double expert_param_share = 1;
  /// A mixture of experts, per layer and direction: one all-to-all of the routed rows (each rank
  /// sends its tokens x k rows out and takes its experts' rows back), and the experts' TP
  /// all-reduces of those rows (an expert's output in forward, its input's gradient in backward)
  double all_to_all_s = 0, expert_tp_all_reduce_s = 0;
  /// Context parallelism, per layer: the ring's key/value exchanges in forward and (with their
  /// gradients) in backward, what the attention blocks computed beside them do not hide; or
  /// Ulysses' all-to-alls of q, k, v and the output (and of their gradients), none hidden
  double cp_fwd_s = 0, cp_bwd_s = 0;
  double overhead = 1.2;  ///< DeviceProfile::layer_overhead: measured layer over modelled matmuls
  double layer_activation_bytes = 0, layer_input_bytes = 0, logits_bytes = 0, boundary_bytes = 0;
};
LayerCosts layer_costs(const ModelShape& model, const Cluster& cluster, const Workload& work, int64_t micro_batch,
                       int tp, int dp, bool sequence = false, int ep = 1, int cp = 1, bool cp_all_to_all = false);

/// All-to-all of `bytes` a rank sends over `ranks` devices: (n-1)/n of it leaves the rank, one
/// message to each other rank.
double all_to_all_seconds(double bytes, int ranks, double bandwidth, double latency);

/// Where a stage sits: first or last of the pipeline, whether its data-parallel ranks share a
/// node, whether the next stage is on its node, and how many micro-batches it holds (1F1B: the
/// stages after it + 1, at most the micro-batch count).
struct Placement {
  bool first = true, last = true, dp_in_node = true, next_in_node = true;
  int in_flight = 1;
  int micro_batches = 1;  ///< of the step: a fully sharded stage gathers its layers for each
};
StageEstimate stage_estimate(const ModelShape& model, const Cluster& cluster, const Workload& work,
                             const LayerCosts& costs, const Stage& stage, const Placement& where);

/// ZeRO-1's gradient sync in all-reduces of the gradients' volume: its reduce-scatter is an
/// all-reduce and a slice, then an all-gather (half an all-reduce; on a CPU a second all-reduce,
/// train/zero_adamw.cpp).
inline double zero_sync_all_reduces(const DeviceProfile& device) { return device.host ? 2.0 : 1.5; }
/// Fully sharded communication in all-reduces of the gathered bytes: an all-gather is half an
/// all-reduce's volume on GPUs; on a CPU Gloo's all-gather is counted as a whole one (it ran slower
/// than an all-reduce of the same bytes, bench/RESULTS.md).
inline double gather_all_reduces(const DeviceProfile& device) { return device.host ? 1.0 : 0.5; }
/// A reduce-scatter: half an all-reduce on GPUs; on a CPU a whole one (Gloo has none, dist/group.h).
inline double reduce_scatter_all_reduces(const DeviceProfile& device) { return device.host ? 1.0 : 0.5; }

/// Seconds waited for `units` collectives of `comm` s each, where each after the first is started
/// (prefetched) while the unit before it computes for `compute` s, and `overlap` of that compute
/// can hide communication (Cluster::overlap): the first in full, each other's excess over what hides.
double exposed_prefetched(double comm, double compute, int units, double overlap);

/// Bytes a rank holds per parameter for weights + gradients, and for the optimizer (AdamW's two
/// moments, plus bf16's float32 master copy).
double weight_bytes_per_param(const Workload& work);
double optimizer_bytes_per_param(const Workload& work);
/// The fraction of a device's memory a plan may use.
constexpr double kUsableMemory = 0.9;
inline double to_gib(double bytes) { return bytes / double(1ull << 30); }

Estimate estimate(const ModelShape& model, const Cluster& cluster, const Workload& work, const Candidate& c);

}  // namespace slapo::plan
