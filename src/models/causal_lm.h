// The LM-head root shared by the zoo's classes: base model, then head, then the causal-LM loss
// (or, for MaskedLM, the masked-LM loss) when labels are given.
#pragma once

#include <algorithm>

#include "models/sequence_split.h"
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
    if (split_) return split_forward(args);
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
    return without_labels(logits, base, kw);
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

  /// What a call without labels returns: the logits, or more where the call asks for it (Mixtral's
  /// logits and load-balancing loss, with output_router_logits = true).
  virtual Value without_labels(const at::Tensor& logits, const Value&, const c10::optional<c10::impl::GenericDict>&) const {
    return logits;
  }

  /// context_parallel (SplitsSequences): set by the family once its modules took the split
  std::shared_ptr<const SequenceSplit> split_;
  // Under context_parallel every rank takes the whole rows, keeps its tokens, and returns their
  // logits, or the whole sequence's loss (each token's label is the next token's id, wherever that
  // token lives).
  Value split_forward(const Values& args) {
    auto ids = tensor_arg(args, 0, this->type_name().c_str(), "input_ids");
    auto kw = kwargs_arg(args, 1);
    // packed documents (position_ids of the whole rows) where the family reads them: its base model
    // takes this rank's tokens' positions and masks by document
    auto known = keywords();
    const bool documents = std::find(known.begin(), known.end(), "position_ids") != known.end();
    check_kwargs(kw, documents ? std::vector<std::string>{"labels", "position_ids"} : std::vector<std::string>{"labels"},
                 this->type_name() + " under context_parallel (attention_mask: not yet)");
    auto labels = kwarg_tensor(kw, "labels");
    auto local = split_->local_indices(ids.size(1), ids.device(), this->type_name().c_str());
    Values inner{ids.index_select(1, local)};
    if (kwarg_tensor(kw, "position_ids")) inner.push_back(args[1]);
    auto logits = this->call(head_, hidden_of(this->call(base_, inner)));
    if (!labels) return logits;
    check_labels(*labels, ids);
    return split_causal_lm_loss(*split_, logits, *labels, this->type_name().c_str());
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
