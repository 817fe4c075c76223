// The LM-head root shared by the zoo's classes: base model, then head, then the causal-LM loss
// (or, for MaskedLM, the masked-LM loss) when labels are given.
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
    if (!at::isIntegralType(ids.scalar_type(), /*includeBool=*/false))
      throw Error(fmt::format("{}: input_ids must be integer token ids (int64), got {} of shape [{}]", this->type_name(),
                              c10::toString(ids.scalar_type()), fmt::join(ids.sizes(), ", ")));
    if (args.size() > 1 && !args[1].isNone() && !args[1].isGenericDict())
      throw Error(fmt::format("{}: the second argument is a table of keywords ({}), got {}", this->type_name(),
                              fmt::format("{} =", fmt::join(keywords(), " =, ")), args[1].tagKind()));
    auto kw = kwargs_arg(args, 1);
    check_kwargs(kw, keywords(), this->type_name(), flags());
    auto labels = kwarg_tensor(kw, "labels");
    if (labels) check_labels(*labels, ids);
    Values inner{ids};
    if (args.size() > 1) inner.push_back(args[1]);
    Value base = this->call(base_, inner);
    auto logits = this->call(head_, hidden_of(base));
    if (labels) return with_extra_loss(lm_loss(logits, *labels), base, kw);
    return logits;
  }

  /// The loss of `logits` against `labels`: position t predicts label t + 1.
  virtual at::Tensor lm_loss(const at::Tensor& logits, const at::Tensor& labels) const {
    return causal_lm_loss(logits, labels);
  }

  /// The keywords a call takes: its base model's and `labels`; `flags`: its true/false ones.
  virtual std::vector<std::string> keywords() const { return {"labels", "attention_mask"}; }
  virtual std::vector<std::string> flags() const { return {}; }
  /// The hidden states the head reads from what the base model returned (a tensor, unless the base
  /// returns more beside it: Mixtral's router logits).
  virtual at::Tensor hidden_of(const Value& base) const { return base.toTensor(); }
  /// The loss with what the base model's other outputs add to it (Mixtral's load balancing).
  virtual at::Tensor with_extra_loss(at::Tensor loss, const Value&, const c10::optional<c10::impl::GenericDict>&) const {
    return loss;
  }

 private:
  void check_labels(const at::Tensor& labels, const at::Tensor& ids) const {
    if (!at::isIntegralType(labels.scalar_type(), /*includeBool=*/false) || labels.sizes() != ids.sizes())
      throw Error(fmt::format("{}: labels must be integer token ids (int64) of input_ids' shape [{}], got {} of shape [{}]",
                              this->type_name(), fmt::join(ids.sizes(), ", "), c10::toString(labels.scalar_type()),
                              fmt::join(labels.sizes(), ", ")));
  }

  std::string base_, head_;
};

/// The masked-LM root (BertForMaskedLM, RobertaForMaskedLM): the same call, and with labels the
/// unshifted loss over the positions whose label is not -100.
template <class Derived>
class MaskedLM : public CausalLM<Derived> {
 public:
  using CausalLM<Derived>::CausalLM;

 protected:
  at::Tensor lm_loss(const at::Tensor& logits, const at::Tensor& labels) const override {
    return masked_lm_loss(logits, labels, this->type_name().c_str());
  }
};

}  // namespace slapo
