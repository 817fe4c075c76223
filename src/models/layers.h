// Leaf layers and containers of the model zoo, with Hugging Face's class names and shapes.
#pragma once

#include "core/module.h"

namespace slapo {

/// y = x W^T + b, weight [out, in] (torch.nn.Linear).
class Linear : public ModuleBase<Linear> {
 public:
  Linear(int64_t in, int64_t out, bool bias, const at::TensorOptions& opts = {});
  std::string describe() const override;
  /// Weight sharded along its input dim with a whole bias: the bias is added after the sync.
  bool row_parallel() const;

 protected:
  Value forward(Values args) override;
  Value finish(Value out) override;
};

/// GPT-2's Conv1D: y = x W + b with weight [in, out] (transposed against Linear, as HF stores it).
class Conv1D : public ModuleBase<Conv1D> {
 public:
  Conv1D(int64_t in, int64_t out, const at::TensorOptions& opts = {});
  std::string describe() const override;
  bool row_parallel() const;

 protected:
  Value forward(Values args) override;
  Value finish(Value out) override;
};

class LayerNorm : public ModuleBase<LayerNorm> {
 public:
  LayerNorm(int64_t n, double eps, const at::TensorOptions& opts = {});
  std::string describe() const override;
  double eps;

 protected:
  Value forward(Values args) override;
};

/// LlamaRMSNorm: normalises in float32, scales by weight.
class RMSNorm : public ModuleBase<RMSNorm> {
 public:
  /// `type_name`: the HF class it stands for (LlamaRMSNorm, Qwen2RMSNorm).
  RMSNorm(int64_t n, double eps, const at::TensorOptions& opts = {}, std::string type_name = "LlamaRMSNorm");
  std::string describe() const override;
  double eps;

 protected:
  Value forward(Values args) override;
};

class Embedding : public ModuleBase<Embedding> {
 public:
  Embedding(int64_t num, int64_t dim, c10::optional<int64_t> padding_idx,
            const at::TensorOptions& opts = {});
  std::string describe() const override;
  c10::optional<int64_t> padding_idx;

 protected:
  Value forward(Values args) override;
};

class Dropout : public ModuleBase<Dropout> {
 public:
  explicit Dropout(double p);
  std::string describe() const override;
  double p;

 protected:
  Value forward(Values args) override;
};

/// The drop rate of `m` when it is a Dropout that runs plain (Module::runs_plain): p in training,
/// 0 in eval; none for any other module (a replaced or hooked child must be called).
c10::optional<double> plain_dropout_rate(const Module& m);

/// Elementwise activations under their Hugging Face class names.
class Activation : public ModuleBase<Activation> {
 public:
  /// `hf_name`: an ACT2FN key ("gelu", "gelu_new", "relu", "silu", "tanh", "gelu_pytorch_tanh").
  static std::shared_ptr<Activation> from_hf_name(const std::string& hf_name);
  Activation(std::string type_name, std::string fn);
  const std::string fn;

 protected:
  Value forward(Values args) override;
};

class Identity : public ModuleBase<Identity> {
 public:
  Identity() : ModuleBase("Identity") {}

 protected:
  Value forward(Values args) override;
};

/// Calls its children "0", "1", ... in order, each on the previous one's output.
class Sequential : public ModuleBase<Sequential> {
 public:
  explicit Sequential(std::vector<std::shared_ptr<Module>> modules = {});

 protected:
  Value forward(Values args) override;
};

/// Holds children "0", "1", ...; its parent decides how to call them.
class ModuleList : public ModuleBase<ModuleList> {
 public:
  explicit ModuleList(std::vector<std::shared_ptr<Module>> modules = {});
  size_t size() const { return children_in_order().size(); }

 protected:
  Value forward(Values args) override;
};

}  // namespace slapo
