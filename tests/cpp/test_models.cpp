// Zoo models: Hugging Face parameter counts, names, tying and forward shapes.
#include <torch/torch.h>
#include <doctest/doctest.h>

#include "models/zoo.h"

using namespace slapo;

namespace {
BuildOptions meta() {
  BuildOptions o;
  o.tensor_options = at::TensorOptions().device(at::kMeta);
  return o;
}
int64_t count(const std::string& preset) {
  auto m = build_model(ModelConfig::preset(preset), meta());
  return count_unique_parameters(*m);
}

// Parameter counts worked out from the config by hand, term by term as HF's classes build them.
int64_t bert_expected(int64_t V, int64_t H, int64_t L, int64_t I, int64_t P, int64_t T) {
  int64_t embeddings = V * H + P * H + T * H + 2 * H;
  int64_t layer = 4 * (H * H + H) + 2 * H + (H * I + I) + (I * H + H) + 2 * H;
  int64_t head = (H * H + H) + 2 * H + V;  // transform dense + LayerNorm + bias; decoder tied
  return embeddings + L * layer + head;
}
int64_t gpt2_expected(int64_t V, int64_t H, int64_t L, int64_t P) {
  int64_t block = 2 * H + (H * 3 * H + 3 * H) + (H * H + H) + 2 * H + (H * 4 * H + 4 * H) + (4 * H * H + H);
  return V * H + P * H + L * block + 2 * H;  // lm_head tied to wte
}
int64_t llama_expected(int64_t V, int64_t H, int64_t L, int64_t heads, int64_t kv, int64_t I) {
  int64_t d = H / heads;
  int64_t layer = H * heads * d + 2 * H * kv * d + heads * d * H + 3 * H * I + 2 * H;
  return 2 * V * H + L * layer + H;  // untied embed_tokens and lm_head
}
int64_t gpt_neo_expected(int64_t V, int64_t H, int64_t L, int64_t P) {
  int64_t block = 2 * H + 3 * H * H + (H * H + H) + 2 * H + (H * 4 * H + 4 * H) + (4 * H * H + H);  // q/k/v unbiased
  return V * H + P * H + L * block + 2 * H;  // lm_head tied to wte
}
// W: word_embed_proj_dim; positions keep 2 rows ahead; project_in / project_out where W != H
int64_t opt_expected(int64_t V, int64_t H, int64_t L, int64_t F, int64_t P, int64_t W, bool pre_norm) {
  int64_t layer = 4 * (H * H + H) + 2 * H + (H * F + F) + (F * H + H) + 2 * H;
  return V * W + (P + 2) * H + (W != H ? 2 * H * W : 0) + L * layer + (pre_norm ? 2 * H : 0);
}
}  // namespace

TEST_CASE("models: GPT-Neo and OPT presets have the parameter counts transformers builds") {
  CHECK(count("gpt-neo-125M") == 125198592);
  CHECK(count("gpt-neo-125M") == gpt_neo_expected(50257, 768, 12, 2048));
  CHECK(count("gpt-neo-1.3B") == 1315575808);
  CHECK(count("gpt-neo-1.3B") == gpt_neo_expected(50257, 2048, 24, 2048));
  CHECK(count("gpt-neo-2.7B") == gpt_neo_expected(50257, 2560, 32, 2048));
  CHECK(count("opt-125m") == 125239296);
  CHECK(count("opt-125m") == opt_expected(50272, 768, 12, 3072, 2048, 768, true));
  CHECK(count("opt-350m") == 331196416);
  CHECK(count("opt-350m") == opt_expected(50272, 1024, 24, 4096, 2048, 512, false));
  CHECK(count("opt-1.3b") == opt_expected(50272, 2048, 24, 8192, 2048, 2048, true));
  CHECK(count("opt-6.7b") == opt_expected(50272, 4096, 32, 16384, 2048, 4096, true));
  CHECK(count("opt-66b") == opt_expected(50272, 9216, 64, 36864, 2048, 9216, true));
}

TEST_CASE("models: preset parameter counts equal Hugging Face's") {
  CHECK(count("bert-base-uncased") == 109514298);
  CHECK(count("bert-base-uncased") == bert_expected(30522, 768, 12, 3072, 512, 2));
  CHECK(count("bert-large-uncased") == bert_expected(30522, 1024, 24, 4096, 512, 2));
  // RobertaForMaskedLM: BERT's tree with 514 positions, one token type and its own head of BERT's size
  CHECK(count("roberta-base") == 124697433);
  CHECK(count("roberta-base") == bert_expected(50265, 768, 12, 3072, 514, 1));
  CHECK(count("roberta-large") == bert_expected(50265, 1024, 24, 4096, 514, 1));
  // AlbertForMaskedLM: one shared layer, counted once; the embedding factorised through 128 wide
  CHECK(count("albert-base-v2") == 11221680);
  CHECK(count("t5-small") == 60506624);  // shared embedding, tied head, relative bias in each stack's first layer
  CHECK(count("gpt2") == 124439808);
  CHECK(count("gpt2") == gpt2_expected(50257, 768, 12, 1024));
  CHECK(count("gpt2-medium") == gpt2_expected(50257, 1024, 24, 1024));
  CHECK(count("gpt2-medium") == 354823168);
  CHECK(count("TinyLlama-1.1B") == llama_expected(32000, 2048, 22, 32, 4, 5632));
  CHECK(count("TinyLlama-1.1B") == 1100048384);
  CHECK(count("gpt2-large") == gpt2_expected(50257, 1280, 36, 1024));
  CHECK(count("gpt2-large") == 774030080);
  CHECK(count("llama-7b") == llama_expected(32000, 4096, 32, 32, 32, 11008));
  CHECK(count("llama-7b") == 6738415616);
  // Qwen2: q/k/v biases, tied head; Mistral: LLaMA's shape with 8 key/value heads, untied
  int64_t qwen2_05b = llama_expected(151936, 896, 24, 14, 2, 4864) - 151936 * 896 + 24 * (896 + 2 * 128);
  CHECK(count("Qwen2-0.5B") == qwen2_05b);
  CHECK(count("Qwen2-0.5B") == 494032768);
  CHECK(count("Qwen2-1.5B") == 1543714304);
  CHECK(count("Mistral-7B-v0.1") == llama_expected(32000, 4096, 32, 32, 8, 14336));
  CHECK(count("Mistral-7B-v0.1") == 7241732096);
}

TEST_CASE("models: HF module names and tied weights") {
  auto gpt2 = build_model(ModelConfig::preset("gpt2"), meta());
  auto names = gpt2->named_modules("", /*include_self=*/false).keys();
  CHECK(std::find(names.begin(), names.end(), "transformer.h.0.attn.c_attn") != names.end());
  CHECK(std::find(names.begin(), names.end(), "transformer.h.11.mlp.c_proj") != names.end());
  auto params = gpt2->named_parameters();
  CHECK(params["lm_head.weight"].is_same(params["transformer.wte.weight"]));
  CHECK(params["transformer.h.0.attn.c_attn.weight"].sizes() == at::IntArrayRef({768, 2304}));

  auto bert = build_model(ModelConfig::preset("bert-base-uncased"), meta());
  auto bp = bert->named_parameters();
  CHECK(bp["cls.predictions.decoder.weight"].is_same(bp["bert.embeddings.word_embeddings.weight"]));
  CHECK(bp["cls.predictions.decoder.bias"].is_same(bp["cls.predictions.bias"]));
  CHECK(bp.contains("bert.encoder.layer.11.attention.self.query.weight"));
  CHECK_FALSE(bp.contains("bert.pooler.dense.weight"));
}

TEST_CASE("models: small configs run forward and return the loss with labels") {
  torch::manual_seed(0);
  nlohmann::json cfg = {{"model_type", "llama"}, {"hidden_size", 64}, {"intermediate_size", 128},
                        {"num_hidden_layers", 2}, {"num_attention_heads", 4}, {"num_key_value_heads", 2},
                        {"vocab_size", 100}};
  auto llama = build_model(ModelConfig(cfg));
  auto ids = torch::randint(0, 100, {2, 7});
  auto logits = (*llama)(Values{ids}).toTensor();
  CHECK(logits.sizes() == at::IntArrayRef({2, 7, 100}));
  c10::impl::GenericDict kw(c10::StringType::get(), c10::AnyType::get());
  kw.insert("labels", ids);
  auto loss = (*llama)(Values{ids, kw}).toTensor();
  CHECK(loss.dim() == 0);
  CHECK(loss.item<double>() > 3.0);  // about log(100) for a fresh model
  loss.backward();
  CHECK(llama->named_parameters()["model.layers.0.self_attn.q_proj.weight"].grad().defined());
}

TEST_CASE("models: deep_clone keeps tying inside the copy and shares nothing") {
  nlohmann::json cfg = {{"model_type", "gpt2"}, {"n_embd", 32}, {"n_layer", 1}, {"n_head", 2},
                        {"vocab_size", 50}, {"n_positions", 16}};
  auto model = build_model(ModelConfig(cfg));
  auto copy = model->deep_clone();
  auto a = model->named_parameters(), b = copy->named_parameters();
  CHECK(b["lm_head.weight"].is_same(b["transformer.wte.weight"]));
  CHECK_FALSE(b["lm_head.weight"].is_same(a["lm_head.weight"]));
  CHECK(torch::equal(a["transformer.h.0.attn.c_attn.weight"], b["transformer.h.0.attn.c_attn.weight"]));
  CHECK(count_unique_parameters(*copy) == count_unique_parameters(*model));
}
