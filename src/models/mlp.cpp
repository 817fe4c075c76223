// A two-layer MLP (fc1 -> act -> fc2 -> dropout): the smallest model to shard and verify.
#include "models/layers.h"
#include "models/config_check.h"
#include "models/zoo.h"

namespace slapo {
namespace {

class MLP : public ModuleBase<MLP>, public HasConfig {
 public:
  MLP(const ModelConfig& c, const at::TensorOptions& o) : ModuleBase("MLP"), HasConfig(c) {
    int64_t h = c.integer("hidden_size"), inner = c.integer("intermediate_size", 4 * h);
    bool bias = c.flag("bias", true);
    set_child("fc1", std::make_shared<Linear>(h, inner, bias, o));
    set_child("act", Activation::from_hf_name(c.str("hidden_act", "gelu")));
    set_child("fc2", std::make_shared<Linear>(inner, h, bias, o));
    set_child("dropout", std::make_shared<Dropout>(c.number("dropout", 0.0)));
  }

 protected:
  Value forward(Values args) override {
    auto x = tensor_arg(args, 0, "MLP", "input");
    return call("dropout", call("fc2", call("act", call("fc1", x))));
  }
};

}  // namespace

std::shared_ptr<Module> build_mlp(const ModelConfig& config, const BuildOptions& options) {
  auto c = config.with_defaults("mlp");
  check_config(c);
  auto model = std::make_shared<MLP>(c, options.tensor_options);
  if (options.init_weights && options.tensor_options.device() != at::kMeta)
    init_weights_hf(*model, c.number("initializer_range", 0.02));
  return model;
}

}  // namespace slapo
