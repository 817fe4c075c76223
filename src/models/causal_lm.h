// The LM-head root shared by the zoo's BERT, GPT-2 and LLaMA classes: base model, then head,
// then the causal-LM loss when labels are given.
#pragma once

#include "models/transformer_ops.h"
#include "models/zoo.h"

namespace slapo {

template <class Derived>
class CausalLM : public ModuleBase<Derived>, public HasConfig {
 public:
  CausalLM(std::string type, const ModelConfig& c, std::string base, std::string head)
      : ModuleBase<Derived>(std::move(type)), HasConfig(c), base_(std::move(base)), head_(std::move(head)) {}

 protected:
  // (input_ids, {labels=, attention_mask=, ...}) -> logits, or the loss with labels
  Value forward(Values args) override {
    auto ids = tensor_arg(args, 0, this->type_name().c_str(), "input_ids");
    Values inner{ids};
    if (args.size() > 1) inner.push_back(args[1]);
    auto logits = this->call(head_, this->call(base_, inner).toTensor());
    if (auto labels = kwarg_tensor(kwargs_arg(args, 1), "labels")) return causal_lm_loss(logits, *labels);
    return logits;
  }

 private:
  std::string base_, head_;
};

}  // namespace slapo
