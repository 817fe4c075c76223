// Alpha-beta communication, shape-indexed matmul throughput, and Megatron's memory accounting.
#include "plan/cost_model.h"

#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <mutex>

#include "core/error.h"
#include "io/json_file.h"
#include "models/rope.h"
#include "plan/profile_device.h"
#include "train/zero_adamw.h"

namespace slapo::plan {

double DeviceProfile::matmul_seconds(double m, double k, double n, const std::string& dtype) const {
  const Matmul* best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  for (auto& row : matmul) {
    if (row.dtype != dtype) continue;
    double d = std::fabs(std::log(m / row.m)) + std::fabs(std::log(k / row.k)) + std::fabs(std::log(n / row.n));
    if (d < best_distance) best_distance = d, best = &row;
  }
  if (!best)
    throw Error(fmt::format("plan: the profile of {} has no {} matmul rows (--dtype float32, or a profile measured "
                            "in {})", name, dtype, dtype));
  return 2.0 * m * k * n / (best->tflops * 1e12);
}

double DeviceProfile::layer_overhead(double hidden, const std::string& dtype) const {
  const Layer* best = nullptr;
  double best_distance = std::numeric_limits<double>::infinity();
  for (auto& row : layers) {
    if (row.dtype != dtype) continue;
    double d = std::fabs(std::log(hidden / row.hidden));
    if (d < best_distance) best_distance = d, best = &row;
  }
  if (!best) return 1.2;
  // the layer's matmuls as the cost model counts them: q, k, v, o, a 4x MLP, scores and context
  double h = best->hidden, t = best->tokens;
  double forward = matmul_seconds(t, h, 3 * h, dtype) + matmul_seconds(t, h, h, dtype) +
                   matmul_seconds(t, h, 4 * h, dtype) + matmul_seconds(t, 4 * h, h, dtype) +
                   2 * matmul_seconds(best->seq, h / best->heads, best->seq, dtype) * (t / best->seq) * best->heads;
  // below 1 where the device's fused kernels (flash attention) beat the modelled matmuls
  return std::clamp(best->fwd_bwd_s / (3.0 * forward), 0.25, 20.0);
}

DeviceProfile DeviceProfile::from_json(const nlohmann::json& j, const std::string& name, double memory_bytes) {
  DeviceProfile p;
  p.name = j.value("device", name);
  p.host = p.name.rfind("cpu", 0) == 0;
  p.memory_bytes = memory_bytes;
  if (j.contains("copy_GBps") && j["copy_GBps"].is_number()) p.copy_bytes_per_s = j["copy_GBps"].get<double>() * 1e9;
  if (!j.contains("matmul") || !j["matmul"].is_array())
    throw Error(fmt::format("plan: the device profile '{}' has no \"matmul\" array", name));
  for (auto& row : j["matmul"])
    p.matmul.push_back({row.at("dtype").get<std::string>(), row.at("m").get<double>(), row.at("k").get<double>(),
                        row.at("n").get<double>(), row.at("tflops").get<double>()});
  if (j.contains("layer") && j["layer"].is_array())
    for (auto& row : j["layer"])
      p.layers.push_back({row.value("dtype", std::string("float32")), row.at("hidden").get<double>(),
                          row.at("heads").get<double>(), row.at("tokens").get<double>(), row.at("seq").get<double>(),
                          row.at("fwd_bwd_s").get<double>()});
  return p;
}

DeviceProfile DeviceProfile::measure_cpu(int devices_per_node) {
  DeviceProfile p;
  p.name = "cpu";
  p.host = true;
  p.memory_bytes = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE)) /
                   devices_per_node;
  torch::NoGradGuard no_grad;
  // ranks share the cores, as the launcher's OMP_NUM_THREADS does
  int threads = at::get_num_threads();
  at::set_num_threads(std::max(1, threads / devices_per_node));
  for (auto [m, k, n] : {std::array<int64_t, 3>{256, 256, 256}, {512, 512, 2048}, {1024, 1024, 1024},
                         {1024, 1024, 4096}, {1024, 4096, 1024}}) {
    auto a = torch::randn({m, k}), b = torch::randn({k, n});
    double s = time_of([&] { (void)at::matmul(a, b); }, 0.06);
    p.matmul.push_back({"float32", double(m), double(k), double(n), 2.0 * m * k * n / s / 1e12});
  }
  {  // a transformer layer, forward + backward: what the matmuls leave out
    torch::AutoGradMode grad(true);
    const int64_t hidden = 256, heads = 4, seq = 128, batch = 2;
    auto layer = torch::nn::TransformerEncoderLayer(
        torch::nn::TransformerEncoderLayerOptions(hidden, heads).dim_feedforward(4 * hidden).dropout(0.0));
    auto x = torch::randn({seq, batch, hidden}).requires_grad_(true);
    double s = time_of([&] { layer->forward(x).sum().backward(); }, 0.1);
    p.layers.push_back({"float32", double(hidden), double(heads), double(seq * batch), double(seq), s});
  }
  {  // memory bandwidth: a 64 MiB copy, bytes read + written
    auto src = torch::randn({16 << 20}), dst = torch::empty_like(src);
    p.copy_bytes_per_s = 2.0 * 4.0 * double(src.numel()) / time_of([&] { dst.copy_(src); }, 0.06);
  }
  at::set_num_threads(threads);
  return p;
}

Cluster Cluster::parse(const std::string& spec, const std::string& devices_dir) {
  auto bad = [&](const std::string& why) {
    return Error(fmt::format("plan: --cluster '{}' {} (forms: NODESxDEVICES:cpu, NODESxDEVICES:h100, "
                             "NODESxDEVICES:profile.json)", spec, why));
  };
  auto colon = spec.find(':'), x = spec.find('x');
  if (colon == std::string::npos || x == std::string::npos || x > colon) throw bad("is not NODESxDEVICES:DEVICE");
  Cluster c;
  try {
    size_t used = 0;
    c.nodes = std::stoi(spec.substr(0, x), &used);
    if (used != x) throw bad("has a malformed node count");
    c.per_node = std::stoi(spec.substr(x + 1, colon - x - 1), &used);
    if (used != colon - x - 1) throw bad("has a malformed device count");
  } catch (const std::logic_error&) {
    throw bad("has a malformed count");
  }
  if (c.nodes < 1 || c.per_node < 1 || c.devices() > 65536) throw bad("needs 1 to 65536 devices");
  std::string device = spec.substr(colon + 1);
  if (device == "cpu") {
    // Gloo over loopback TCP between processes of one machine; between machines, 10 GbE
    // measured once a process for each rank count: plans made side by side are priced alike
    static std::mutex lock;
    static std::map<int, DeviceProfile> measured;
    {
      std::lock_guard<std::mutex> hold(lock);
      auto found = measured.find(c.per_node);
      if (found == measured.end()) found = measured.emplace(c.per_node, DeviceProfile::measure_cpu(c.per_node)).first;
      c.device = found->second;
    }
    c.intra_bw = 2e9, c.intra_latency = 50e-6, c.inter_bw = 1.25e9, c.inter_latency = 100e-6;
    return c;
  }
  namespace fs = std::filesystem;
  fs::path file = device.size() > 5 && device.substr(device.size() - 5) == ".json" ? fs::path(device)
                                                                                 : fs::path(devices_dir) / (device + ".json");
  if (!fs::is_regular_file(file))
    throw bad(fmt::format("names a device with no profile at '{}' (profiles: cpu, or the *.json in {}; "
                          "SLAPO_DEVICES sets the directory)", file.string(), devices_dir));
  nlohmann::json j = read_json_file(file.string(), "plan");
  // A profile may say its memory and links (profile-device writes both); else the data-sheet
  // figures devices/README.md gives for an H100 SXM node: NVLink 4 (450 GB/s each way), 8 x 400
  // Gb/s InfiniBand per node (50 GB/s per GPU), 80 GiB.
  double memory = j.contains("memory_bytes") && j["memory_bytes"].is_number() ? j["memory_bytes"].get<double>()
                                                                               : 80.0 * (1ull << 30);
  // the ranks of a node share a CPU's memory (profile-device marks it)
  if (j.value("memory_shared", false)) memory /= c.per_node;
  c.device = DeviceProfile::from_json(j, device, memory);
  c.intra_bw = 450e9, c.intra_latency = 5e-6, c.inter_bw = 50e9, c.inter_latency = 10e-6;
  if (j.contains("links") && j["links"].is_object()) {
    auto& l = j["links"];
    auto number = [&](const char* key, double fallback) {
      return l.contains(key) && l[key].is_number() ? l[key].get<double>() : fallback;
    };
    c.intra_bw = number("intra_GBps", 450) * 1e9, c.intra_latency = number("intra_latency_us", 5) * 1e-6;
    c.inter_bw = number("inter_GBps", 50) * 1e9, c.inter_latency = number("inter_latency_us", 10) * 1e-6;
  }
  c.overlap = c.device.host ? 0.0 : 1.0;
  if (j.contains("links") && j["links"].is_object() && j["links"].contains("overlap")) {
    auto& v = j["links"]["overlap"];
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 1)
      throw bad(fmt::format("has links.overlap {} in '{}' (a fraction from 0 to 1)", v.dump(), file.string()));
    c.overlap = v.get<double>();
  }
  return c;
}

double exposed_prefetched(double comm, double compute, int units, double overlap) {
  if (units <= 0) return 0.0;
  return comm + (units - 1) * std::max(0.0, comm - overlap * compute);
}

double all_reduce_seconds(double bytes, int ranks, double bandwidth, double latency) {
  if (ranks <= 1) return 0.0;
  return 2.0 * (ranks - 1) / ranks * bytes / bandwidth + 2.0 * (ranks - 1) * latency;
}

ModelShape ModelShape::from_config(const ModelConfig& config, const std::string& name) {
  ModelShape s;
  s.type = config.model_type();
  s.name = name;
  auto c = config.with_defaults(s.type);
  if (s.type == "gpt2") {
    s.hidden = c.integer("n_embd"), s.layers = c.integer("n_layer"), s.heads = c.integer("n_head");
    s.inner = c.integer("n_inner", 4 * s.hidden), s.vocab = c.integer("vocab_size");
  } else if (s.type == "albert") {
    // num_hidden_layers calls of the shared groups, inner_group_num layers each
    s.hidden = c.integer("hidden_size"), s.heads = c.integer("num_attention_heads");
    s.layers = c.integer("num_hidden_layers") * c.integer("inner_group_num");
    s.inner = c.integer("intermediate_size"), s.vocab = c.integer("vocab_size");
    s.head_width = c.integer("embedding_size");
    s.one_stage_reason = "ALBERT's layers share their parameters, so a cut would split one layer's weights over stages";
  } else if (s.type == "t5") {
    // the encoder's and decoder's layers in one list, priced as their mean
    s.hidden = c.integer("d_model"), s.heads = c.integer("num_heads"), s.head_dim = c.integer("d_kv");
    int64_t encoder = c.integer("num_layers"), decoder = c.has("num_decoder_layers") ? c.integer("num_decoder_layers") : encoder;
    s.layers = encoder + decoder;
    s.attention_blocks = 1.0 + double(decoder) / double(s.layers);
    s.inner = c.integer("d_ff"), s.vocab = c.integer("vocab_size");
    s.gated_mlp = c.str("feed_forward_proj", "relu").rfind("gated-", 0) == 0;
    s.tied_head = c.flag("tie_word_embeddings", true);
    s.one_stage_reason = "T5's decoder reads the encoder's output in every layer, and a pipeline stage takes one chain "
                         "of tensors";
  } else if (s.type == "gpt_neo") {
    s.hidden = c.integer("hidden_size"), s.layers = c.integer("num_layers"), s.heads = c.integer("num_heads");
    s.inner = c.integer("intermediate_size", 4 * s.hidden), s.vocab = c.integer("vocab_size");
  } else if (s.type == "opt") {
    s.hidden = c.integer("hidden_size"), s.layers = c.integer("num_hidden_layers");
    s.heads = c.integer("num_attention_heads"), s.inner = c.integer("ffn_dim"), s.vocab = c.integer("vocab_size");
  } else if (s.type == "bert" || s.type == "roberta" || s.type == "llama" || s.type == "qwen2" || s.type == "mistral" ||
             s.type == "mixtral") {
    s.hidden = c.integer("hidden_size"), s.layers = c.integer("num_hidden_layers");
    s.heads = c.integer("num_attention_heads"), s.inner = c.integer("intermediate_size");
    s.vocab = c.integer("vocab_size");
    s.gated_mlp = s.type != "bert" && s.type != "roberta";
    if (s.type == "mixtral") {
      s.experts = c.integer("num_local_experts"), s.experts_per_token = c.integer("num_experts_per_tok");
    }
  } else {
    throw Error(fmt::format("plan: cannot plan a '{}' model (bert, roberta, albert, t5, gpt2, gpt_neo, opt, llama, "
                            "qwen2, mistral, mixtral)",
                            s.type));
  }
  const bool llama_shaped = s.type == "llama" || s.type == "qwen2" || s.type == "mistral" || s.type == "mixtral";
  // what sch:context_parallel takes (models/llama.cpp, gpt2.cpp: split_sequences)
  if (s.type == "gpt2") s.context_parallel = c.number("attn_pdrop", 0.1) == 0;
  // (sliding windows too: their attention is priced as whole causal attention, with cp or without)
  if (llama_shaped && s.type != "mixtral")
    s.context_parallel = c.number("attention_dropout", 0.0) == 0 && rope_from_config(c).type != "dynamic";
  if (llama_shaped) s.tied_head = false;
  s.kv_heads = llama_shaped ? c.integer("num_key_value_heads", s.heads) : s.heads;
  if (s.head_dim == 0) s.head_dim = llama_shaped && c.has("head_dim") ? c.integer("head_dim") : s.hidden / s.heads;
  if (s.head_width == 0) s.head_width = s.hidden;
  int64_t attn = s.hidden * s.heads * s.head_dim * 2 + 2 * s.hidden * s.kv_heads * s.head_dim;
  int64_t mlp = (s.gated_mlp ? 3 : 2) * s.hidden * s.inner;
  if (s.experts > 0) {  // the MLP is E experts and the router's E x hidden matrix
    s.expert_params = s.experts * mlp;
    mlp = s.expert_params + s.experts * s.hidden;
  }
  s.layer_params = static_cast<int64_t>(std::llround((s.attention_blocks - 1.0) * double(attn))) + attn + mlp;
  s.gathered_params = s.layer_params;
  if (s.type == "albert")  // each call gathers its group's layers, whose parameters every call shares
    s.layer_params = c.integer("num_hidden_groups") * c.integer("inner_group_num") * (attn + mlp) / s.layers;
  // ALBERT's factorised embedding: the table is embedding_size wide, projected to hidden
  s.embedding_params = s.vocab * s.head_width + (s.head_width != s.hidden ? s.head_width * s.hidden : 0);
  s.total_params = s.layers * s.layer_params + s.embedding_params + (s.tied_head ? 0 : s.vocab * s.head_width);
  return s;
}

bool Candidate::uniform_mesh() const {
  // one rank layout runs one tp x dp, one ZeRO setting, one sequence parallelism and one fully
  // sharded setting for all stages
  for (auto& s : stages)
    if (s.tp != tp || s.dp != dp || s.zero != zero || s.sequence != sequence || s.fully_sharded != fully_sharded ||
        s.keep_gathered != keep_gathered || s.ep != ep || s.cp != cp || s.cp_all_to_all != cp_all_to_all)
      return false;
  return true;
}

int Candidate::devices() const {
  if (stages.empty()) return tp * dp;
  int n = 0;
  for (auto& s : stages) n += s.tp * s.dp;
  return n;
}

std::vector<Stage> Candidate::resolved(int layers) const {
  if (!stages.empty()) return stages;
  return {Stage{layers, tp, dp, checkpoint, zero, sequence, fully_sharded, keep_gathered, ep, cp, cp_all_to_all}};
}

const char* Candidate::sharded_name() const {
  return !fully_sharded ? "" : keep_gathered ? ", zero-2" : ", fully sharded";
}

std::string Candidate::describe() const {
  if (stages.empty())
    return fmt::format("tp {} x dp {}{}{}{}{}{}{}", tp, dp,
                       ep > 1   ? fmt::format(", ep {}", ep)
                       : cp > 1 ? fmt::format(", cp {}{}", cp, cp_all_to_all ? " all-to-all" : "")
                                : "",
                       micro_batches > 1 ? fmt::format(", {} micro", micro_batches) : "", sequence ? ", sequence" : "",
                       checkpoint ? ", checkpoint" : "", zero ? ", zero-1" : "", sharded_name());
  std::vector<std::string> parts;
  for (auto& s : stages) parts.push_back(fmt::format("{}{}", s.layers, s.checkpoint ? "c" : ""));
  if (uniform_mesh())
    return fmt::format("tp {} x dp {} x pp {} ({}){}, {} micro{}{}{}", tp, dp, stages.size(), fmt::join(parts, "+"),
                       ep > 1   ? fmt::format(", ep {}", ep)
                       : cp > 1 ? fmt::format(", cp {}{}", cp, cp_all_to_all ? " all-to-all" : "")
                                : "",
                       micro_batches, sequence ? ", sequence" : "", zero ? ", zero-1" : "", sharded_name());
  std::vector<std::string> meshes;
  for (auto& s : stages) meshes.push_back(fmt::format("{}x{}{}{}", s.tp, s.dp, s.sequence ? "s" : "", s.zero ? "z" : ""));
  return fmt::format("pp {} on tp x dp {} ({} layers), {} micro", stages.size(), fmt::join(meshes, ","),
                     fmt::join(parts, "+"), micro_batches);
}

double weight_bytes_per_param(const Workload& work) { return work.dtype == "bfloat16" ? 4.0 : 8.0; }
double optimizer_bytes_per_param(const Workload& work) { return work.dtype == "bfloat16" ? 12.0 : 8.0; }

namespace {
double element_bytes(const Workload& work) { return work.dtype == "bfloat16" ? 2.0 : 4.0; }
// the embedding and head are split over TP when the vocabulary divides (vocab-parallel)
double vocab_split(const ModelShape& m, int tp) { return m.vocab % tp == 0 ? tp : 1.0; }
}  // namespace

double all_to_all_seconds(double bytes, int ranks, double bandwidth, double latency) {
  if (ranks <= 1) return 0.0;
  return double(ranks - 1) / ranks * bytes / bandwidth + (ranks - 1) * latency;
}

LayerCosts layer_costs(const ModelShape& m, const Cluster& cluster, const Workload& work, int64_t micro_batch, int tp_,
                       int dp, bool sequence, int ep, int cp, bool cp_all_to_all) {
  LayerCosts c;
  const double bytes = element_bytes(work);
  const double seqs = static_cast<double>(micro_batch) / dp;  // sequences per data-parallel rank
  const double tokens = seqs * static_cast<double>(work.seq);
  const double h = m.hidden, tp = tp_;
  auto mm = [&](double k, double n) { return cluster.device.matmul_seconds(tokens, k, n, work.dtype); };
  // One layer's forward: its projections and the attention scores and context (of each attention
  // it runs), split over `t` ranks; the layout says how much of it the ranks divide
  double q_width = m.heads * m.head_dim, kv_width = m.kv_heads * m.head_dim;
  // A mixture of experts: the router, then the rank's E / ep experts, each on its share of the
  // routed rows (balanced routing: the ep ranks' tokens x k over the E experts), one matmul each
  const double experts_held = m.experts > 0 ? double(m.experts) / ep : 0.0;
  const double expert_rows = m.experts > 0 ? tokens * m.experts_per_token * ep / m.experts : 0.0;
  auto mlp_fwd = [&](double t) {
    if (m.experts == 0) return (m.gated_mlp ? 2 * mm(h, m.inner / t) : mm(h, m.inner / t)) + mm(m.inner / t, h);
    auto rows_mm = [&](double k, double n) { return cluster.device.matmul_seconds(expert_rows, k, n, work.dtype); };
    return mm(h, double(m.experts)) + experts_held * (2 * rows_mm(h, m.inner / t) + rows_mm(m.inner / t, h));
  };
  // Attention's scores and context: each sequence's queries against its keys. Under context
  // parallelism a rank holds seq / cp of the queries of seqs x cp sequences, against every key (or,
  // all-to-all, every query of 1/cp of the heads: the same work); the pieces the causal mask hides
  // are left out, about half (load-balanced chunks), and with packed documents those whose queries
  // and keys share no document (distributed/attention_pieces): a row of pieces, seq / 2cp on a side,
  // reaches back over one document, about (piece + document) / seq of the scores. Without cp the
  // model computes every score and masks them.
  auto attention_fwd = [&](double t) {
    const double rows = double(work.seq) / cp, piece = double(work.seq) / (2 * cp);
    const double kept = cp == 1                ? 1.0
                        : work.documents == 0 ? 0.5
                                              : std::min(0.5, (piece + double(work.documents)) / double(work.seq));
    return kept * 2 * cluster.device.matmul_seconds(rows, m.head_dim, work.seq, work.dtype) * seqs * cp * m.heads / t;
  };
  auto layer_fwd = [&](double t) {
    return m.attention_blocks * (mm(h, (q_width + 2 * kv_width) / t) + mm(q_width / t, h) + attention_fwd(t)) +
           mlp_fwd(t);
  };
  const TpLayout layout = m.layout_on(tp_, dp, sequence);
  c.layer_fwd_s = tp_ > 1 ? layout.split_compute * layer_fwd(tp) + (1 - layout.split_compute) * layer_fwd(1)
                          : layer_fwd(1);
  c.forward_all_reduces = tp_ > 1 ? layout.forward_all_reduces : 0;
  c.backward_all_reduces = tp_ > 1 ? layout.backward_all_reduces : 0;
  if (tp_ > 1 && m.attention_blocks > 1) {
    // a cross-attention's output all-reduced in forward; in backward, its input's gradient, and
    // that of the encoder's output its k and v read
    c.forward_all_reduces += m.attention_blocks - 1;
    c.backward_all_reduces += 2 * (m.attention_blocks - 1);
  }
  c.layer_param_share = layout.split_params / tp + (1 - layout.split_params);
  c.expert_param_share = c.layer_param_share / ep;
  c.head_fwd_s = mm(m.head_width, m.vocab / vocab_split(m, tp_));
  c.overhead = cluster.device.layer_overhead(h, work.dtype);
  // Megatron TP all-reduces the layer's activations: within a node when TP fits in one
  bool tp_in_node = tp_ <= cluster.per_node;
  c.tp_all_reduce_s = all_reduce_seconds(tokens * h * bytes, tp_, tp_in_node ? cluster.intra_bw : cluster.inter_bw,
                                         tp_in_node ? cluster.intra_latency : cluster.inter_latency);
  if (m.experts > 0) {
    // the experts' rows: one all-to-all out to their experts' ranks and one back, over the ep
    // group (ep replicas of tp ranks each, consecutive: within a node when they fit in one). Every
    // rank of a TP group sends its group's tokens (they route the same), and each expert split
    // over TP all-reduces its output rows (forward) and their input's gradient (backward) in place
    // of the dense MLP's all-reduce.
    const bool ep_in_node = tp_ * ep <= cluster.per_node;
    c.all_to_all_s = 2 * all_to_all_seconds(tokens * m.experts_per_token * h * bytes, ep,
                                            ep_in_node ? cluster.intra_bw : cluster.inter_bw,
                                            ep_in_node ? cluster.intra_latency : cluster.inter_latency);
    c.expert_tp_all_reduce_s =
        experts_held * all_reduce_seconds(expert_rows * h * bytes, tp_, tp_in_node ? cluster.intra_bw : cluster.inter_bw,
                                          tp_in_node ? cluster.intra_latency : cluster.inter_latency);
    c.forward_all_reduces = std::max(0.0, c.forward_all_reduces - 1);  // attention's alone: the MLP's is the experts'
    c.backward_all_reduces = std::max(0.0, c.backward_all_reduces - 1);
  }
  if (cp > 1 && cp_all_to_all) {
    // Ulysses: q, k, v to their heads' ranks and the output back, one all-to-all each, (cp - 1) /
    // cp of them off the rank, nothing to overlap with (attention waits for them); backward the
    // same volumes reversed. Key/value heads are repeated to the query heads where they do not
    // divide over cp (sch:context_parallel does so)
    const bool cp_in_node = tp_ * cp <= cluster.per_node;
    // a rank's key/value heads (TP divides them: divides_heads)
    const double kv_sent = (m.kv_heads / tp_) % cp == 0 ? kv_width : q_width;
    auto exchange = [&](double width) {  // one all-to-all of a tensor `width` wide a token
      return all_to_all_seconds(tokens * width / tp * bytes, cp, cp_in_node ? cluster.intra_bw : cluster.inter_bw,
                                cp_in_node ? cluster.intra_latency : cluster.inter_latency);
    };
    c.cp_fwd_s = 2 * exchange(q_width) + 2 * exchange(kv_sent);  // q, k, v out; the output back
    c.cp_bwd_s = c.cp_fwd_s;
  } else if (cp > 1) {
    // the ring: cp - 1 steps a pass, each sending this rank's keys and values (the kv heads, split
    // over TP) to the next rank of the group while the block in hand computes; backward sends them
    // and their gradients around again beside twice the compute. The group is cp consecutive
    // replicas of tp ranks: within a node when they fit in one
    const bool cp_in_node = tp_ * cp <= cluster.per_node;
    const double bw = cp_in_node ? cluster.intra_bw : cluster.inter_bw;
    const double latency = cp_in_node ? cluster.intra_latency : cluster.inter_latency;
    const double block = tokens * 2 * kv_width / tp * bytes, step_compute = attention_fwd(tp) / cp;
    auto exposed = [&](double bytes_sent, double compute) {
      return std::max(0.0, latency + bytes_sent / bw - cluster.overlap * compute);
    };
    c.cp_fwd_s = (cp - 1) * exposed(block, step_compute);
    c.cp_bwd_s = (cp - 1) * exposed(2 * block, 2 * step_compute);
  }
  // Megatron's 34 + 5 a s / h values per token and width in 2-byte precision (scaled to the
  // element size), the layout's share split over TP; a checkpointed layer keeps its input and
  // recomputes the rest. A cross-attention adds an attention block's 11 + 5as/h, 8 + 5as/h of it split.
  // Ring attention keeps no scores (q, k, v, the output and the log-sum-exp): 5as/h drops out.
  const double attention = cp > 1 ? 0.0 : 5.0 * m.heads * work.seq / h, extra = m.attention_blocks - 1.0;
  double values = 34.0 + attention + extra * (11.0 + attention);
  double split = layout.split_activations >= 0 ? layout.split_activations
                                               : (24.0 + attention + extra * (8.0 + attention)) / values;
  if (m.experts > 0) {
    // Megatron's MLP (19: its input 2, the 4h activation's input and output 8 + 8, split, and a
    // dropout mask 1) becomes each routed row's: its gathered input and its output scaled by the
    // router's weight (2 + 2), and the SwiGLU's gate, up, activation and product (4 x 2 x inner/h,
    // split); k rows a token, balanced over the experts
    const double k = m.experts_per_token, wide = 8.0 * m.inner / h;
    values = 15.0 + attention + k * (4.0 + wide);
    split = (8.0 + attention + k * wide) / values;
  }
  c.layer_activation_bytes = tokens * h * values * bytes / 2.0 * (split / tp + (1 - split));
  c.layer_input_bytes = tokens * h * bytes;
  c.logits_bytes = 2 * tokens * m.vocab * bytes / vocab_split(m, tp_);
  c.boundary_bytes = tokens * h * bytes;
  return c;
}

StageEstimate stage_estimate(const ModelShape& m, const Cluster& cluster, const Workload& work, const LayerCosts& c,
                             const Stage& stage, const Placement& where) {
  StageEstimate e;
  // backward takes twice the forward; checkpointing runs each layer's forward once more; the
  // elementwise ops, norms and softmax add what the device's measured layer says (LayerCosts)
  double per_layer = c.layer_fwd_s * (3.0 + (stage.checkpoint ? 1.0 : 0.0));
  e.compute_s = c.overhead * (stage.layers * per_layer + (where.last ? 3.0 * c.head_fwd_s : 0.0));
  // recomputing a checkpointed layer's forward runs its forward all-reduces again
  e.tp_comm_s = stage.layers * (c.forward_all_reduces * (stage.checkpoint ? 2 : 1) + c.backward_all_reduces) *
                c.tp_all_reduce_s;
  // a mixture of experts: each layer's rows out to their experts and back in forward (again when
  // recomputed) and in backward, and the experts' own TP all-reduces alike
  if (m.experts > 0) {
    const double passes = stage.checkpoint ? 3.0 : 2.0;
    e.ep_comm_s = stage.layers * passes * c.all_to_all_s;
    e.tp_comm_s += stage.layers * passes * c.expert_tp_all_reduce_s;
  }
  // context parallelism's exchanges (the ring's or the all-to-alls), in forward (again when
  // recomputed) and backward
  e.p2p_s = stage.layers * (c.cp_fwd_s * (stage.checkpoint ? 2.0 : 1.0) + c.cp_bwd_s);
  // the activations forward and their gradient back to the next stage, point to point
  if (!where.last) {
    double bw = where.next_in_node ? cluster.intra_bw : cluster.inter_bw;
    double latency = where.next_in_node ? cluster.intra_latency : cluster.inter_latency;
    e.p2p_s += 2 * (latency + c.boundary_bytes / bw);
  }
  // parameters: the layers split over TP; the embedding on the first stage and the head on the
  // last (one matrix when they are tied and the stage holds both)
  bool tied = m.tied_head;
  double vocab_matrices = (where.first ? 1 : 0) + (where.last ? 1 : 0);
  if (tied && where.first && where.last) vocab_matrices = 1;
  // a mixture of experts' layers hold 1/ep of their experts; those are averaged over the dp / ep
  // replicas holding the same experts
  const double layer_part = stage.layers * static_cast<double>(m.layer_params - m.expert_params) * c.layer_param_share +
                            stage.layers * static_cast<double>(m.expert_params) * c.expert_param_share;
  const double expert_part = stage.layers * static_cast<double>(m.expert_params) * c.expert_param_share;
  const int expert_dp = std::max(1, stage.dp / std::max(1, stage.ep));
  const double params = layer_part + vocab_matrices * m.embedding_params / vocab_split(m, stage.tp);
  // DP: the gradients of this rank's shard, once per step. ZeRO-1 then all-gathers the updated
  // parameters; its reduce-scatter is an all-reduce and a slice (c10d's Gloo has none).
  double bw = where.dp_in_node ? cluster.intra_bw : cluster.inter_bw;
  double latency = where.dp_in_node ? cluster.intra_latency : cluster.inter_latency;
  double gradient_sync = all_reduce_seconds((params - expert_part) * element_bytes(work), stage.dp, bw, latency) +
                         (expert_part > 0 ? all_reduce_seconds(expert_part * element_bytes(work), expert_dp, bw, latency)
                                          : 0.0);
  e.sync_s = gradient_sync * (stage.zero && stage.dp > 1 ? zero_sync_all_reduces(cluster.device) : 1.0);
  // Fully sharded: every micro-batch all-gathers each layer for its forward and again for its
  // backward, and reduce-scatters its gradients. Each layer's gathers after the first are
  // prefetched while the layer before it computes, so only what the compute does not hide is
  // waited for (Cluster::overlap); so is the reduce-scatter, beside the next layer's backward. A
  // one-stage plan fully shards its root too (the embedding and head, gathered first, unhidden); a
  // pipeline stage's root holds the cuts, so there they stay whole, averaged once a step.
  // Kept gathered (ZeRO-2): one gather a call, the weights whole from forward to backward.
  const bool fully_sharded = stage.fully_sharded && stage.dp > 1, kept = fully_sharded && stage.keep_gathered;
  // the experts fully sharded over the replicas holding them (dp / ep), the rest over all dp
  const double dense_part = layer_part - expert_part;
  const bool experts_sharded = fully_sharded && expert_part > 0 && expert_dp > 1;
  const double sharded_dense = !fully_sharded ? 0.0 : where.first && where.last ? params - expert_part : dense_part;
  const double sharded_experts = experts_sharded ? expert_part : 0.0;
  const double sharded = sharded_dense + sharded_experts;
  if (fully_sharded) {
    const double gathers = kept ? 1.0 : 2.0, gather = gather_all_reduces(cluster.device);
    const double scatter = reduce_scatter_all_reduces(cluster.device);
    auto collective = [&](double parameters, int ranks) {
      return all_reduce_seconds(parameters * element_bytes(work), ranks, bw, latency);
    };
    const double one_layer =
        stage.layers == 0 ? 0.0
                          : collective(static_cast<double>(m.gathered_params - m.expert_params) * c.layer_param_share,
                                       stage.dp) +
                                (experts_sharded ? collective(m.expert_params * c.expert_param_share, expert_dp) : 0.0);
    const double forward = c.overhead * c.layer_fwd_s, backward = forward * (stage.checkpoint ? 3.0 : 2.0);
    const double root = sharded_dense - dense_part;
    // in backward each layer's reduce-scatter (and, resharded, the gather of the layer before it)
    // runs beside that layer's backward (fully_shard's overlap_reduce): the last one is waited for
    double waited = exposed_prefetched(gather * one_layer, forward, stage.layers, cluster.overlap) +
                    exposed_prefetched(((kept ? 0.0 : gather) + scatter) * one_layer, backward, stage.layers,
                                       cluster.overlap) +
                    (root > 0 ? (gathers * gather + scatter) * collective(root, stage.dp) : 0.0);
    e.sync_s = where.micro_batches * waited;
    // what stays whole (a stage's root) is averaged once a step; experts on one replica each, never
    if (params - expert_part > sharded_dense) e.sync_s += collective(params - expert_part - sharded_dense, stage.dp);
  }
  const double held = params - sharded + sharded_dense / stage.dp + sharded_experts / expert_dp;  // this rank's slices and what stays whole
  // AdamW reads and writes each parameter, its gradient and two moments: 28 bytes a parameter
  // (bf16: the float32 master copy in place of the weight), over the parameters this rank updates
  // ZeRO-1 slices the experts over the replicas holding them, the rest over every replica
  const bool zero = stage.zero && stage.dp > 1;
  const double updated = zero ? (params - expert_part) / stage.dp + expert_part / expert_dp : held;
  if (cluster.device.copy_bytes_per_s > 0) e.optimizer_s = updated * 28.0 / cluster.device.copy_bytes_per_s;
  // fully sharded: this rank's slices, and the layer being computed and the next one (prefetched)
  // whole, with their whole gradients before the reduce-scatter; kept gathered, every weight whole
  // (half the bytes a parameter: the weight, half its gradient)
  const double gathered = 2.0 * static_cast<double>(m.gathered_params - m.expert_params) * c.layer_param_share +
                          (experts_sharded ? 2.0 * m.expert_params * c.expert_param_share : 0.0);
  e.param_bytes = !fully_sharded ? params * weight_bytes_per_param(work)
                  : kept        ? (params + held + gathered) * weight_bytes_per_param(work) / 2
                                : (held + gathered) * weight_bytes_per_param(work);
  e.optimizer_bytes = updated * optimizer_bytes_per_param(work);
  // Gradients are kept (zeroed) from step to step, so backward computes a weight's gradient into a
  // tensor of its own and then adds it to the kept one. The vocabulary matrix's is the one that
  // shows: the head's beside every activation when backward starts; at the end, the embedding's,
  // and where a tied head and embedding share the stage, the head's contribution held through
  // backward and their sum besides (three matrices; GPT-2 124M: 442 MiB for 1 layer or 12,
  // bench/backward_tail.lua).
  const double vocab_grad = m.vocab * m.head_width / vocab_split(m, stage.tp) * element_bytes(work);
  double per_micro_batch = stage.layers * (stage.checkpoint ? c.layer_input_bytes : c.layer_activation_bytes);
  e.activation_bytes = where.in_flight * per_micro_batch + (stage.checkpoint ? c.layer_activation_bytes : 0.0) +
                       (where.last ? c.logits_bytes + vocab_grad : 0.0);
  e.tail_bytes = tied && where.first && where.last ? 3.0 * vocab_grad : where.first ? vocab_grad : 0.0;
  // after backward, the step's own buffers: AdamW updates in place (the one-pass CPU kernel,
  // LibTorch 2's fused CUDA one, ZeRO-1 slice by slice: train/adamw_update.cpp), so only ZeRO-1's
  // chunk buffer, the reduce-scatter's copy of it and this rank's part (train/zero_adamw.h)
  // (a chunk is every rank's slices at once: the whole gradients, where they are smaller)
  e.update_bytes =
      zero ? (2.0 + 1.0 / stage.dp) * std::min(static_cast<double>(kZeroChunkBytes), params * element_bytes(work))
           : 0.0;
  e.peak_bytes = e.param_bytes + e.optimizer_bytes + std::max({e.activation_bytes, e.tail_bytes, e.update_bytes});
  return e;
}

Estimate estimate(const ModelShape& m, const Cluster& cluster, const Workload& work, const Candidate& c) {
  Estimate e;
  auto stages = c.resolved(static_cast<int>(m.layers));
  const int count = static_cast<int>(stages.size()), micro = std::max(1, c.micro_batches);
  const int64_t micro_batch = work.batch / micro;
  int offset = 0, slowest = 0;
  auto node = [&](int device) { return device / cluster.per_node; };
  for (int s = 0; s < count; ++s) {
    const Stage& st = stages[s];
    int n = st.tp * st.dp;
    Placement where{s == 0, s == count - 1, node(offset) == node(offset + n - 1), node(offset + n - 1) == node(offset + n),
                    std::min(micro, count - s), micro};
    e.stages.push_back(stage_estimate(
        m, cluster, work, layer_costs(m, cluster, work, micro_batch, st.tp, st.dp, st.sequence, st.ep, st.cp, st.cp_all_to_all), st,
        where));
    if (e.stages.back().time_s() > e.stages[slowest].time_s()) slowest = s;
    offset += n;
  }
  // 1F1B: every stage's time once (the first micro-batch's way through) and the slowest stage's
  // for each further micro-batch; then the gradient syncs and updates, every stage's at once
  double once = 0;
  for (auto& st : e.stages) {
    e.compute_s += st.compute_s, e.tp_comm_s += st.tp_comm_s, e.p2p_s += st.p2p_s, e.ep_comm_s += st.ep_comm_s;
    if (st.once_s() > once) once = st.once_s(), e.dp_comm_s = st.sync_s, e.optimizer_s = st.optimizer_s;
    if (st.peak_bytes > e.peak_bytes)
      e.peak_bytes = st.peak_bytes, e.param_bytes = st.param_bytes, e.optimizer_bytes = st.optimizer_bytes,
      e.activation_bytes = st.activation_bytes;
  }
  const StageEstimate& bottleneck = e.stages[slowest];
  e.compute_s += (micro - 1) * bottleneck.compute_s;
  e.tp_comm_s += (micro - 1) * bottleneck.tp_comm_s;
  e.p2p_s += (micro - 1) * bottleneck.p2p_s;
  e.ep_comm_s += (micro - 1) * bottleneck.ep_comm_s;
  e.step_s = e.compute_s + e.tp_comm_s + e.p2p_s + e.dp_comm_s + e.optimizer_s + e.ep_comm_s;
  e.fits = e.peak_bytes <= kUsableMemory * cluster.device.memory_bytes;
  return e;
}

}  // namespace slapo::plan
