// Which zoo models context_parallel can split, the split a root holds, and its whole-sequence loss.
#include "models/sequence_split.h"

#include <fmt/format.h>

#include "core/error.h"
#include "models/transformer_ops.h"

namespace slapo {

void set_sequence_split(Module& root, const std::shared_ptr<const SequenceSplit>& split, const std::string& where) {
  auto* model = dynamic_cast<SplitsSequences*>(&root);
  if (!model)
    throw Error(fmt::format("context_parallel: {} is a {}; ring attention is written for GPT-2 and LLaMA-family causal "
                            "LMs (GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM)",
                            where, root.type_name()));
  model->split_sequences(split, where);
}

at::Tensor split_causal_lm_loss(const SequenceSplit& split, const at::Tensor& local_logits, const at::Tensor& labels,
                                const char* who) {
  auto local = split.local_indices(labels.size(1), local_logits.device(), who);
  auto targets = next_token_targets(labels).to(local_logits.device()).index_select(1, local).reshape({-1});
  auto flat = local_logits.reshape({-1, local_logits.size(-1)});
  auto sum = at::cross_entropy_loss(flat.to(at::kFloat), targets, {}, at::Reduction::Sum, /*ignore_index=*/-100);
  return split.mean_loss(sum, targets.ne(-100).sum());
}

std::shared_ptr<const SequenceSplit> sequence_split_of(const Module& root) {
  auto* model = dynamic_cast<const SplitsSequences*>(&root);
  return model ? model->sequence_split() : nullptr;
}

}  // namespace slapo
