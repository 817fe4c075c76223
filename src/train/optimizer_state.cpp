// AdamW and SGD state <-> named tensors.
#include "train/optimizer_state.h"

#include <map>
#include <sstream>
#include <type_traits>

#include "core/error.h"

namespace slapo {

namespace {
template <typename Key>
Key key_of(const at::Tensor& p) {
  if constexpr (std::is_same_v<Key, std::string>) {
    std::ostringstream address;  // what c10::guts::to_string made of the pointer in 1.x
    address << static_cast<const void*>(p.unsafeGetTensorImpl());
    return address.str();
  } else {
    return p.unsafeGetTensorImpl();
  }
}
}  // namespace

OptimizerStateKey optimizer_state_key(const at::Tensor& p) { return key_of<OptimizerStateKey>(p); }

NamedTensors optimizer_state_tensors(torch::optim::Optimizer& optimizer, const NamedTensors& params) {
  NamedTensors out;
  auto& state = optimizer.state();
  for (auto& [name, p] : params) {
    auto found = state.find(optimizer_state_key(p));
    if (found == state.end()) continue;
    if (auto* adam = dynamic_cast<torch::optim::AdamWParamState*>(found->second.get())) {
      out.emplace_back(name + ".step", torch::tensor(adam->step(), at::kLong));
      out.emplace_back(name + ".exp_avg", adam->exp_avg().detach().clone());
      out.emplace_back(name + ".exp_avg_sq", adam->exp_avg_sq().detach().clone());
    } else if (auto* sgd = dynamic_cast<torch::optim::SGDParamState*>(found->second.get())) {
      if (sgd->momentum_buffer().defined()) out.emplace_back(name + ".momentum_buffer", sgd->momentum_buffer().detach().clone());
    } else {
      throw Error("checkpoint: only AdamW and SGD optimizer states can be saved");
    }
  }
  return out;
}

void load_optimizer_state_tensors(torch::optim::Optimizer& optimizer, const NamedTensors& params,
                                  const NamedTensors& state) {
  std::map<std::string, at::Tensor> by_name(state.begin(), state.end());
  bool adamw = dynamic_cast<torch::optim::AdamW*>(&optimizer) != nullptr;
  auto& slots = optimizer.state();
  for (auto& [name, p] : params) {
    if (adamw) {
      auto avg = by_name.find(name + ".exp_avg");
      if (avg == by_name.end()) continue;
      auto s = std::make_unique<torch::optim::AdamWParamState>();
      s->step(by_name.at(name + ".step").item<int64_t>());
      s->exp_avg(avg->second.clone());
      s->exp_avg_sq(by_name.at(name + ".exp_avg_sq").clone());
      if (s->exp_avg().sizes() != p.sizes())
        throw Error(fmt::format("resume: optimizer state of '{}' has shape [{}] but the parameter has [{}]", name,
                                fmt::join(s->exp_avg().sizes(), ", "), fmt::join(p.sizes(), ", ")));
      slots[optimizer_state_key(p)] = std::move(s);
    } else {
      auto buf = by_name.find(name + ".momentum_buffer");
      if (buf == by_name.end()) continue;
      auto s = std::make_unique<torch::optim::SGDParamState>();
      s->momentum_buffer(buf->second.clone());
      slots[optimizer_state_key(p)] = std::move(s);
    }
  }
}

}  // namespace slapo
