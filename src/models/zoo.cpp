// Model selection by model_type, HF-style initialisation and unique parameter counting.
#include "models/zoo.h"

#include <cmath>
#include <functional>
#include <unordered_set>

#include "core/error.h"
#include "models/layers.h"
#include "models/resnet.h"
#include "models/vision_layers.h"

namespace slapo {

std::shared_ptr<Module> build_model(const ModelConfig& config, const BuildOptions& options) {
  const std::string type = config.model_type();
  if (type == "bert" || type == "roberta") return build_bert(config, options);
  if (type == "albert") return build_albert(config, options);
  if (type == "t5") return build_t5(config, options);
  if (type == "gpt2") return build_gpt2(config, options);
  if (type == "gpt_neo") return build_gpt_neo(config, options);
  if (type == "opt") return build_opt(config, options);
  if (type == "llama" || type == "qwen2" || type == "mistral" || type == "mixtral") return build_llama(config, options);
  if (type == "mlp") return build_mlp(config, options);
  throw_unknown_model_type(type, "models");
}

void init_zoo_weights(Module& root, const ModelConfig& config, const InitHooks& hooks) {
  const std::string type = config.model_type();
  if (type == "t5") return init_weights_t5(root, config.with_defaults("t5"), hooks);
  if (type == "gpt2") return init_weights_gpt2(root, config.with_defaults("gpt2"), hooks);
  if (type == "opt") return init_weights_hf(root, config.number("init_std", 0.02), hooks);  // OPT's name for it
  init_weights_hf(root, config.number("initializer_range", 0.02), hooks);
}

const ModelConfig* model_config(const Module& root) {
  auto* holder = dynamic_cast<const HasConfig*>(&root);
  return holder ? &holder->config : nullptr;
}

void init_weights_hf(Module& root, double std, const InitHooks& hooks) {
  torch::NoGradGuard no_grad;
  // A tied tensor keeps the rule of the first module that owns it in module order (embeddings
  // come before LM heads), as HF initialises before it ties.
  std::unordered_set<c10::TensorImpl*> done;
  auto fresh = [&](Module& m, const char* name) {
    return m.has_param(name) && done.insert(m.param(name).unsafeGetTensorImpl()).second;
  };
  std::function<void(Module&)> visit = [&](Module& m) {
    if (hooks.before) hooks.before(m);
    if (dynamic_cast<Linear*>(&m) || dynamic_cast<Conv1D*>(&m)) {
      if (fresh(m, "weight")) m.param("weight").normal_(0.0, std);
      if (fresh(m, "bias")) m.param("bias").zero_();
    } else if (auto* e = dynamic_cast<Embedding*>(&m)) {
      if (fresh(m, "weight")) {
        e->param("weight").normal_(0.0, std);
        if (e->padding_idx) e->param("weight")[*e->padding_idx].zero_();
      }
    } else if (dynamic_cast<Conv2d*>(&m) || dynamic_cast<BatchNorm2d*>(&m)) {
      init_weights_vision(m);  // torchvision's rule: no HF rule exists for these
    } else if (dynamic_cast<LayerNorm*>(&m) || dynamic_cast<RMSNorm*>(&m)) {
      if (fresh(m, "weight")) m.param("weight").fill_(1.0);
      if (fresh(m, "bias")) m.param("bias").zero_();
    } else {
      for (auto& p : m.named_parameters(/*recurse=*/false))  // e.g. the MLM head's bias
        if (fresh(m, p.key().c_str())) p.value().zero_();
    }
    if (hooks.after) hooks.after(m);
    for (auto& [name, child] : m.children_in_order()) visit(*child);
  };
  visit(root);
}

void init_weights_torch(Module& root, const InitHooks& hooks) {
  torch::NoGradGuard no_grad;
  std::unordered_set<c10::TensorImpl*> done;  // a tied tensor keeps its first owner's rule
  auto fresh = [&](Module& m, const char* name) {
    return m.has_param(name) && done.insert(m.param(name).unsafeGetTensorImpl()).second;
  };
  std::function<void(Module&)> visit = [&](Module& m) {
    if (hooks.before) hooks.before(m);
    if (dynamic_cast<Linear*>(&m) || dynamic_cast<Conv1D*>(&m) || dynamic_cast<Conv2d*>(&m)) {
      // kaiming_uniform(a = sqrt(5)) and the bias from the fan-in: U(-1/sqrt(fan_in), 1/sqrt(fan_in))
      auto w = m.param("weight");
      int64_t fan_in = dynamic_cast<Conv1D*>(&m) ? w.size(0) : w.numel() / w.size(0);
      double bound = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(fan_in, 1)));
      if (fresh(m, "weight")) w.uniform_(-bound, bound);
      if (fresh(m, "bias")) m.param("bias").uniform_(-bound, bound);
    } else if (auto* e = dynamic_cast<Embedding*>(&m)) {
      if (fresh(m, "weight")) {
        e->param("weight").normal_();
        if (e->padding_idx) e->param("weight")[*e->padding_idx].zero_();
      }
    } else if (dynamic_cast<LayerNorm*>(&m) || dynamic_cast<RMSNorm*>(&m) || dynamic_cast<BatchNorm2d*>(&m)) {
      if (fresh(m, "weight")) m.param("weight").fill_(1.0);
      if (fresh(m, "bias")) m.param("bias").zero_();
    } else {
      for (auto& p : m.named_parameters(/*recurse=*/false))
        if (fresh(m, p.key().c_str())) p.value().zero_();
    }
    if (hooks.after) hooks.after(m);
    for (auto& [name, child] : m.children_in_order()) visit(*child);
  };
  visit(root);
}

int64_t count_unique_parameters(torch::nn::Module& module) {
  int64_t total = 0;
  for (auto& p : unique_named_parameters(module)) total += p.second.numel();
  return total;
}

}  // namespace slapo
