// Mixtral's sparse MoE block and its load-balancing loss, as transformers' modeling_mixtral.py.
#include "models/moe.h"

#include <fmt/format.h>

#include "core/error.h"
#include "models/layers.h"

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
        jitter(c.number("router_jitter_noise", 0.0)) {
    int64_t experts = c.integer("num_local_experts");
    if (top_k > experts)
      throw Error(fmt::format("mixtral: num_experts_per_tok {} is more than num_local_experts {}", top_k, experts));
    set_child("gate", std::make_shared<Linear>(c.integer("hidden_size"), experts, false, o));
    std::vector<std::shared_ptr<Module>> list;
    for (int64_t e = 0; e < experts; ++e) list.push_back(std::make_shared<MixtralBlockSparseTop2MLP>(c, o));
    set_child("experts", std::make_shared<ModuleList>(list));
  }
  std::string describe() const override {
    return fmt::format("top_k={}{}", top_k, jitter > 0 ? fmt::format(", router_jitter_noise={:g}", jitter) : "");
  }
  int64_t top_k;
  double jitter;  // training only: the input scaled by a uniform draw from [1 - jitter, 1 + jitter]

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
    auto out = at::zeros_like(tokens);
    // each expert once, on the tokens routed to it: dropless, whatever the imbalance
    int64_t e = 0;
    for (auto& [name, expert] : child("experts")->children_in_order()) {
      auto hits = at::nonzero(selected.eq(e++));  // [n, 2]: token, slot
      auto token = hits.select(1, 0), slot = hits.select(1, 1);
      auto y = (*expert)(Values{tokens.index_select(0, token)}).toTensor();
      out = out.index_add(0, token, y * weights.index({token, slot}).unsqueeze(-1));
    }
    return c10::ivalue::Tuple::create({out.reshape(shape), router_logits});
  }
};

}  // namespace

std::shared_ptr<Module> make_sparse_moe_block(const ModelConfig& c, const at::TensorOptions& o) {
  return std::make_shared<MixtralSparseMoeBlock>(c, o);
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
