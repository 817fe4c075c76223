// Mixtral's sparse MoE block and its load-balancing loss, as transformers' modeling_mixtral.py.
#include "models/moe.h"

#include <torch/version.h>  // TORCH_VERSION_MAJOR, _MINOR: LibTorch's grouped matmul

#include <map>

#include <fmt/format.h>

#include "core/error.h"
#include "models/layers.h"
#include "models/stacked_weights.h"

// _grouped_mm came in 2.8 for Hopper GPUs alone; from 2.9 it also runs elsewhere (ATen loops over
// the groups on the CPU and other GPUs), so "grouped" is offered from 2.9.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 9)
#define SLAPO_GROUPED_MM 1
#include <ATen/autocast_mode.h>
#endif
#if defined(SLAPO_GROUPED_MM) && defined(SLAPO_WITH_TORCH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#endif

namespace slapo {
namespace {

// One expert: w2(act(w1 x) * w3 x), no biases.
class MixtralBlockSparseTop2MLP : public ModuleBase<MixtralBlockSparseTop2MLP> {
 public:
  MixtralBlockSparseTop2MLP(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("MixtralBlockSparseTop2MLP") {
    int64_t h = c.integer("hidden_size"), inner = c.integer("intermediate_size");
    set_child("w1", std::make_shared<Linear>(h, inner, false, o));
    set_child("w2", std::make_shared<Linear>(inner, h, false, o));
    set_child("w3", std::make_shared<Linear>(h, inner, false, o));
    set_child("act_fn", Activation::from_hf_name(c.str("hidden_act", "silu")));
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "MixtralBlockSparseTop2MLP", "hidden_states");
    return call("w2", call("act_fn", call("w1", x)) * call("w3", x));
  }
};

class MixtralSparseMoeBlock : public ModuleBase<MixtralSparseMoeBlock> {
 public:
  MixtralSparseMoeBlock(const ModelConfig& c, const at::TensorOptions& o)
      : ModuleBase("MixtralSparseMoeBlock"),
        top_k(c.integer("num_experts_per_tok")),
        experts(c.integer("num_local_experts")),
        jitter(c.number("router_jitter_noise", 0.0)) {
    if (top_k > experts)
      throw Error(fmt::format("mixtral: num_experts_per_tok {} is more than num_local_experts {}", top_k, experts));
    set_child("gate", std::make_shared<Linear>(c.integer("hidden_size"), experts, false, o));
    std::vector<std::shared_ptr<Module>> list;
    for (int64_t e = 0; e < experts; ++e) list.push_back(std::make_shared<MixtralBlockSparseTop2MLP>(c, o));
    set_child("experts", std::make_shared<ModuleList>(list));
  }
  std::string describe() const override {
    const char* modes[] = {"", ", gathered", ", grouped", ", dense"};
    return fmt::format("top_k={}{}{}{}", top_k, jitter > 0 ? fmt::format(", router_jitter_noise={:g}", jitter) : "",
                       modes[static_cast<int>(mode)], dispatch ? ", " + dispatch->describe() : "");
  }
  int64_t top_k, experts;
  double jitter;  // training only: the input scaled by a uniform draw from [1 - jitter, 1 + jitter]
  ExpertCompute mode = ExpertCompute::kAuto;
  std::shared_ptr<ExpertDispatch> dispatch;

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "MixtralSparseMoeBlock", "hidden_states");
    auto shape = x.sizes().vec();
    if (is_training() && jitter > 0) x = x * at::empty_like(x).uniform_(1.0 - jitter, 1.0 + jitter);
    auto tokens = x.reshape({-1, shape.back()});
    auto router_logits = call("gate", tokens);
    // softmax over every expert in float32, the top k kept and renormalised to sum to 1
    auto [weights, selected] = at::softmax(router_logits, 1, at::kFloat).topk(top_k, -1);
    weights = (weights / weights.sum(-1, true)).to(tokens.scalar_type());
    at::Tensor out;
    if (dispatch) {
      out = dispatch->combine(tokens, selected, weights, *child("experts"), mode);
    } else if (mode == ExpertCompute::kDense) {
      auto routed = at::zeros({tokens.size(0), experts}, weights.options()).scatter(1, selected, weights);
      out = at::zeros_like(tokens);
      for (auto& [name, expert] : child("experts")->children_in_order()) {
        Values input{Value(tokens)};
        out = out + (*expert)(input).toTensor() * routed.select(1, std::stoll(name)).unsqueeze(1);
      }
    } else {  // each (token, slot) a row, each expert once on its rows: dropless, whatever the imbalance
      auto token_of_slot = at::arange(tokens.size(0), selected.options()).repeat_interleave(top_k);
      auto y = run_experts(tokens.index_select(0, token_of_slot), selected.reshape({-1}), *child("experts"), mode);
      out = at::zeros_like(tokens).index_add(0, token_of_slot, y * weights.reshape({-1, 1}));
    }
    return c10::ivalue::Tuple::create({out.reshape(shape), router_logits});
  }
};

MixtralSparseMoeBlock& as_block(Module& m, const char* who) {
  auto* block = dynamic_cast<MixtralSparseMoeBlock*>(&m);
  if (!block) throw Error(fmt::format("{}: {} is not a sparse MoE block (MixtralSparseMoeBlock)", who, m.type_name()));
  return *block;
}

}  // namespace

std::shared_ptr<Module> make_sparse_moe_block(const ModelConfig& c, const at::TensorOptions& o) {
  return std::make_shared<MixtralSparseMoeBlock>(c, o);
}

bool is_sparse_moe_block(const Module& m) { return dynamic_cast<const MixtralSparseMoeBlock*>(&m) != nullptr; }

int64_t moe_expert_count(const Module& block) {
  return as_block(const_cast<Module&>(block), "moe_expert_count").experts;
}

void set_expert_dispatch(Module& block, std::shared_ptr<ExpertDispatch> dispatch) {
  as_block(block, "set_expert_dispatch").dispatch = std::move(dispatch);
}

void set_expert_compute(Module& block, ExpertCompute mode) {
  auto& b = as_block(block, "expert_compute");
  if (mode == ExpertCompute::kDense && b.dispatch)
    throw Error(fmt::format("expert_compute: the block's experts are spread over ranks ({}); \"dense\" runs every "
                            "expert on every token, so it needs them all in this process",
                            b.dispatch->describe()));
  if (mode == ExpertCompute::kGrouped && !grouped_matmul_available())
    throw Error(fmt::format("expert_compute: \"grouped\" runs LibTorch's grouped matmul (_grouped_mm), which LibTorch "
                            "{}.{} does not have (2.9 and later do); choices here: auto, gathered, dense",
                            TORCH_VERSION_MAJOR, TORCH_VERSION_MINOR));
  b.mode = mode;
}

bool grouped_matmul_available() {
#ifdef SLAPO_GROUPED_MM
  return true;
#else
  return false;
#endif
}

void keep_experts(Module& block, int64_t first, int64_t count) {
  auto kept = std::make_shared<ModuleList>();
  for (auto& [name, expert] : block.child("experts")->children_in_order()) {
    int64_t id = std::stoll(name);
    if (id >= first && id < first + count) kept->set_child(name, expert);
  }
  block.set_child("experts", kept);
}

namespace {

// The held experts' projections stacked for a grouped matmul, [E, in, out] each (the stacked
// weights transposed), and the activation.
struct StackedExperts {
  at::Tensor w1, w3, w2;
  Module* act = nullptr;
};

// The held experts' weights by projection when every one is the zoo's SwiGLU MLP running plainly;
// none when one was replaced, sharded with its syncs, checkpointed or hooked (it is called).
struct PlainExperts {
  std::vector<at::Tensor> w1, w3, w2;
  Module* act = nullptr;
  bool fully_sharded = false;  // fully_shard manages their storage
};

// One projection's weights as [E, out, in]: a view where they may be laid side by side in one
// storage (once, then every step), a stacked copy where fully_shard manages their storage.
at::Tensor stacked(const std::vector<at::Tensor>& weights, bool fully_sharded) {
  if (fully_sharded) return at::stack(weights);
  if (!side_by_side(weights)) lay_side_by_side(weights);
  return stacked_view(weights);
}

c10::optional<PlainExperts> plain_experts(const std::map<int64_t, std::shared_ptr<Module>>& held) {
  PlainExperts out;
  for (auto& [id, expert] : held) {
    auto* mlp = dynamic_cast<MixtralBlockSparseTop2MLP*>(expert.get());
    if (!mlp || !mlp->runs_plain()) return c10::nullopt;
    for (const char* name : {"w1", "w3", "w2"}) {
      auto* linear = dynamic_cast<Linear*>(mlp->child(name).get());
      if (!linear || !linear->runs_plain() || linear->has_param("bias") || linear->meta().decomposed) return c10::nullopt;
      out.fully_sharded = out.fully_sharded || !linear->meta().fully_sharded.empty();
    }
    out.w1.push_back(mlp->child("w1")->param("weight"));
    out.w3.push_back(mlp->child("w3")->param("weight"));
    out.w2.push_back(mlp->child("w2")->param("weight"));
    out.act = mlp->child("act_fn").get();
  }
  if (held.empty()) return c10::nullopt;
  return out;
}

StackedExperts stacked_experts(const PlainExperts& p) {
  // y = x W^T: the grouped matmul's second operand is each W transposed, [E, in, out]
  return {stacked(p.w1, p.fully_sharded).transpose(1, 2), stacked(p.w3, p.fully_sharded).transpose(1, 2),
          stacked(p.w2, p.fully_sharded).transpose(1, 2), p.act};
}

// The widths the grouped kernel reads with 16-byte strides (a multiple of 8 in bf16) that are not.
std::vector<std::string> unaligned_widths(const at::Tensor& rows, const PlainExperts& p, at::ScalarType dtype) {
  const int64_t per = 16 / static_cast<int64_t>(c10::elementSize(dtype));
  std::vector<std::string> out;
  if (rows.size(1) % per != 0) out.push_back(fmt::format("hidden {}", rows.size(1)));
  if (p.w1.front().size(0) % per != 0) out.push_back(fmt::format("intermediate {}", p.w1.front().size(0)));
  return out;
}

#ifdef SLAPO_GROUPED_MM
// The dtype the experts' matmuls compute in: the rows', or autocast's on their device.
at::ScalarType compute_dtype(const at::Tensor& rows) {
  const auto device = rows.device().type();
  if (at::autocast::is_autocast_enabled(device)) return at::autocast::get_autocast_dtype(device);
  return rows.scalar_type();
}
#endif

// Each projection of every expert in one grouped matmul over the rows sorted by expert: `ends`
// [E] int32, where each expert's rows end. No expert is called, so every weight still takes part
// in the graph (an expert without rows gets a zero gradient, as a call on no rows gives).
at::Tensor grouped_experts(const at::Tensor& sorted, const at::Tensor& ends, const StackedExperts& w) {
#ifdef SLAPO_GROUPED_MM
  const auto dtype = compute_dtype(sorted);
  auto x = sorted.to(dtype);
  auto project = [&](const at::Tensor& input, const at::Tensor& weight) {
    return at::_grouped_mm(input, weight.to(dtype), ends);
  };
  Values first{Value(project(x, w.w1))};
  auto gate = (*w.act)(first).toTensor();
  return project(gate * project(x, w.w3), w.w2);
#else
  (void)sorted, (void)ends, (void)w;
  throw Error("MixtralSparseMoeBlock: this LibTorch has no grouped matmul (_grouped_mm, from 2.9)");
#endif
}

// Where auto picks grouped compute: rows on a Hopper GPU (compute capability 9, where LibTorch's
// grouped kernel proper runs; elsewhere it loops over the groups) computed in bf16, on a LibTorch
// that has it.
bool grouped_runs_on(const at::Tensor& rows) {
#if defined(SLAPO_GROUPED_MM) && defined(SLAPO_WITH_TORCH_CUDA)
  if (!rows.is_cuda() || compute_dtype(rows) != at::kBFloat16) return false;
  const auto index = rows.device().has_index() ? rows.device().index() : at::cuda::current_device();
  return at::cuda::getDeviceProperties(index)->major == 9;
#else
  (void)rows;
  return false;
#endif
}

// The dtype the grouped kernel reads: autocast's or the rows' (their own where LibTorch has none).
at::ScalarType grouped_dtype(const at::Tensor& rows) {
#ifdef SLAPO_GROUPED_MM
  return compute_dtype(rows);
#else
  return rows.scalar_type();
#endif
}

}  // namespace

at::Tensor run_experts(const at::Tensor& rows, const at::Tensor& expert_of_row, Module& experts, ExpertCompute mode) {
  // rows grouped by expert (a stable sort), one read of the group sizes, then each expert once on
  // its contiguous rows: the layout a grouped matmul takes
  auto order = std::get<1>(expert_of_row.sort(/*stable=*/true, 0, false));
  auto ids = expert_of_row.index_select(0, order);
  auto counts = at::bincount(ids).to(at::kCPU).contiguous();  // int64, as the ids
  auto count_of = [&](int64_t id) { return id < counts.numel() ? counts.data_ptr<int64_t>()[id] : int64_t{0}; };
  std::map<int64_t, std::shared_ptr<Module>> held;  // by expert id, in order
  for (auto& [name, expert] : experts.children_in_order()) held.emplace(std::stoll(name), expert);
  int64_t covered = 0;
  for (auto& [id, expert] : held) covered += count_of(id);
  if (covered != rows.size(0))
    throw Error(fmt::format("MixtralSparseMoeBlock: {} of {} routed rows name an expert this process does not hold",
                            rows.size(0) - covered, rows.size(0)));
  auto sorted = rows.index_select(0, order);
  const bool grouped = mode == ExpertCompute::kGrouped || (mode == ExpertCompute::kAuto && grouped_runs_on(rows));
  if (grouped) {
    auto plain = plain_experts(held);
    if (!plain && mode == ExpertCompute::kGrouped)
      throw Error("MixtralSparseMoeBlock: expert_compute \"grouped\" needs the zoo's experts as built (three plain "
                  "Linear projections without bias, no hooks, replacement, sharding or checkpoint on them); use "
                  "\"gathered\" or \"auto\" for experts changed by a schedule");
    auto unaligned = plain ? unaligned_widths(rows, *plain, grouped_dtype(rows)) : std::vector<std::string>{};
    if (plain && !unaligned.empty() && mode == ExpertCompute::kGrouped && rows.is_cuda())
      throw Error(fmt::format("MixtralSparseMoeBlock: expert_compute \"grouped\" reads rows and weights with 16-byte "
                              "strides, {} elements of {}: {} do not divide; use \"gathered\" or \"auto\"",
                              16 / c10::elementSize(grouped_dtype(rows)), c10::toString(grouped_dtype(rows)),
                              fmt::join(unaligned, " and ")));
    if (plain && (unaligned.empty() || !rows.is_cuda())) {
      std::vector<int64_t> ends;
      int64_t end = 0;
      for (auto& [id, expert] : held) ends.push_back(end += count_of(id));
      auto offsets = at::tensor(ends, at::TensorOptions().dtype(at::kInt)).to(rows.device());
      auto out = grouped_experts(sorted, offsets, stacked_experts(*plain));
      return at::zeros_like(rows).index_copy(0, order, out.to(rows.scalar_type()));
    }
  }
  std::vector<at::Tensor> outs;
  int64_t start = 0;
  // every expert called, on no rows too: each then has a gradient (zero) on every rank, and the
  // output depends on them on every rank, so shard_experts' return exchange and the replicas'
  // averaging of experts are the same collectives everywhere
  for (auto& [id, expert] : held) {
    Values input{Value(sorted.narrow(0, start, count_of(id)))};
    outs.push_back((*expert)(input).toTensor());
    start += count_of(id);
  }
  // in the rows' dtype, as transformers casts each expert's output (autocast: bf16 experts, float32 rows)
  return at::zeros_like(rows).index_copy(0, order, at::cat(outs).to(rows.scalar_type()));
}

at::Tensor load_balancing_loss(const std::vector<at::Tensor>& router_logits, int64_t experts, int64_t top_k,
                               const c10::optional<at::Tensor>& attention_mask) {
  auto device = router_logits.front().device();
  std::vector<at::Tensor> moved;
  for (auto& l : router_logits) moved.push_back(l.to(device));
  auto logits = at::cat(moved, 0);  // [layers * tokens, E]
  auto probs = at::softmax(logits, -1);
  auto selected = std::get<1>(probs.topk(top_k, -1));
  auto routed = at::one_hot(selected, experts).to(probs.scalar_type());  // [N, k, E]
  at::Tensor tokens_per_expert, prob_per_expert;
  if (!attention_mask) {
    tokens_per_expert = routed.mean(0);
    prob_per_expert = probs.mean(0);
  } else {
    auto keep = attention_mask->to(device).to(probs.scalar_type()).reshape({1, -1});
    int64_t layers = logits.size(0) / keep.size(1);
    keep = keep.expand({layers, keep.size(1)}).reshape({-1, 1});  // [N, 1]
    tokens_per_expert = (routed * keep.unsqueeze(-1)).sum(0) / keep.sum();
    prob_per_expert = (probs * keep).sum(0) / keep.sum();
  }
  return (tokens_per_expert * prob_per_expert.unsqueeze(0)).sum() * static_cast<double>(experts);
}

}  // namespace slapo
