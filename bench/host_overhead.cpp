// The same training step as bench/host_step.lua, driven from C++: a small GPT-2 (where the
// host's per-call overhead is visible), forward + backward + AdamW. Prints the median seconds.
//   build/slapo_bench_host [repeats]
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "models/zoo.h"

int main(int argc, char** argv) {
  int repeats = argc > 1 ? std::atoi(argv[1]) : 200;
  torch::manual_seed(0);
  nlohmann::json cfg = {{"model_type", "gpt2"}, {"n_embd", 64}, {"n_layer", 2}, {"n_head", 4}, {"vocab_size", 256},
                        {"n_positions", 32}, {"resid_pdrop", 0.0}, {"embd_pdrop", 0.0}, {"attn_pdrop", 0.0}};
  auto model = slapo::build_model(slapo::ModelConfig(cfg));
  torch::optim::AdamW optimizer(model->parameters(), torch::optim::AdamWOptions(1e-4).weight_decay(0.0));
  auto ids = torch::randint(0, 256, {2, 16});
  c10::impl::GenericDict kw(c10::StringType::get(), c10::AnyType::get());
  kw.insert("labels", ids);
  std::vector<double> samples;
  for (int i = 0; i < repeats + 10; ++i) {
    auto start = std::chrono::steady_clock::now();
    optimizer.zero_grad();
    (*model)(slapo::Values{ids, kw}).toTensor().backward();
    optimizer.step();
    if (i >= 10) samples.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(samples.begin(), samples.end());
  std::printf("cpp %.9f\n", samples[samples.size() / 2]);
}
