// The model zoo: Hugging Face architectures in LibTorch, built from a config.json's fields.
#pragma once

#include <functional>

#include "core/module.h"
#include "models/config.h"

namespace slapo {

struct BuildOptions {
  at::TensorOptions tensor_options;  ///< device and dtype of the parameters ("meta": shapes only)
  bool init_weights = true;          ///< HF's _init_weights; skipped on the meta device
  /// from_pretrained: the checkpoint's dtype (config.json's dtype or torch_dtype, else its first
  /// floating tensor's) replaces tensor_options' dtype, as transformers 5's dtype="auto".
  bool dtype_from_checkpoint = false;
};

/// Builds the LM-head class of `config.model_type()`: BertLMHeadModel (BertForMaskedLM when
/// architectures names it), RobertaForMaskedLM, AlbertForMaskedLM, T5ForConditionalGeneration, GPT2LMHeadModel,
/// GPTNeoForCausalLM, OPTForCausalLM, LlamaForCausalLM, Qwen2ForCausalLM, MistralForCausalLM, MixtralForCausalLM, or our MLP. The config's fields are
/// checked first (models/config_check.h).
std::shared_ptr<Module> build_model(const ModelConfig& config, const BuildOptions& options = {});

std::shared_ptr<Module> build_bert(const ModelConfig& config, const BuildOptions& options);
std::shared_ptr<Module> build_gpt2(const ModelConfig& config, const BuildOptions& options);
std::shared_ptr<Module> build_albert(const ModelConfig& config, const BuildOptions& options);
std::shared_ptr<Module> build_t5(const ModelConfig& config, const BuildOptions& options);
std::shared_ptr<Module> build_gpt_neo(const ModelConfig& config, const BuildOptions& options);
std::shared_ptr<Module> build_opt(const ModelConfig& config, const BuildOptions& options);
std::shared_ptr<Module> build_llama(const ModelConfig& config, const BuildOptions& options);
std::shared_ptr<Module> build_mlp(const ModelConfig& config, const BuildOptions& options);

/// Mixed into a zoo model's root class: the config it was built from (save() writes it back).
class HasConfig {
 public:
  explicit HasConfig(ModelConfig c) : config(std::move(c)) {}
  virtual ~HasConfig() = default;
  ModelConfig config;
};

/// The config a zoo model was built from, or nullptr for other modules.
const ModelConfig* model_config(const Module& root);

/// Called around the initialisation of each module's own parameters, in the order the
/// initialisers visit modules (build makes a module's parameters whole just before and hands
/// each rank its slices just after, so no rank holds the whole model at once).
struct InitHooks {
  std::function<void(Module&)> before, after;
  /// A second pass draws `param` of the module again (GPT-2's c_proj): it is to be made whole again.
  std::function<void(Module&, const std::string& param)> again;
};

/// HF's default initialisation: normal(0, std) for Linear/Conv1D/Embedding weights, zero biases
/// and padding rows, ones and zeros for norms.
void init_weights_hf(Module& root, double std, const InitHooks& hooks = {});

/// transformers' T5 initialisation (scales from the widths and initializer_factor).
void init_weights_t5(Module& root, const ModelConfig& config, const InitHooks& hooks = {});

/// GPT-2's: HF's default, then c_proj's weights drawn again scaled by 1/sqrt(2 n_layer).
void init_weights_gpt2(Module& root, const ModelConfig& config, const InitHooks& hooks = {});

/// A zoo model's own initialisation, as its builder applies it, by config.model_type(): T5's,
/// GPT-2's, OPT's (init_std) or HF's default with initializer_range.
void init_zoo_weights(Module& root, const ModelConfig& config, const InitHooks& hooks = {});

/// PyTorch's own initialisation of each layer (reset_parameters): Linear, Conv1D and Conv2d
/// kaiming-uniform with a fan-in bias, Embedding normal(0, 1), norms 1 and 0, anything else 0.
/// For models outside the zoo, which have no HF rule.
void init_weights_torch(Module& root, const InitHooks& hooks = {});

/// Parameters counted once each, tied ones included once (HF's num_parameters()).
int64_t count_unique_parameters(torch::nn::Module& module);

}  // namespace slapo
