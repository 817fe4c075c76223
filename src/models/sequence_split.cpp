// Which zoo models context_parallel can split, and the split a root holds.
#include "models/sequence_split.h"

#include <fmt/format.h>

#include "core/error.h"

namespace slapo {

void set_sequence_split(Module& root, const std::shared_ptr<const SequenceSplit>& split, const std::string& where) {
  auto* model = dynamic_cast<SplitsSequences*>(&root);
  if (!model)
    throw Error(fmt::format("context_parallel: {} is a {}; ring attention is written for GPT-2 and LLaMA-family causal "
                            "LMs (GPT2LMHeadModel, LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM)",
                            where, root.type_name()));
  model->split_sequences(split, where);
}

std::shared_ptr<const SequenceSplit> sequence_split_of(const Module& root) {
  auto* model = dynamic_cast<const SplitsSequences*>(&root);
  return model ? model->sequence_split() : nullptr;
}

}  // namespace slapo
