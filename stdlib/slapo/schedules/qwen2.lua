--- Tensor parallelism for Qwen2ForCausalLM: LLaMA's module names and shapes, so LLaMA's
--- schedule (q/k/v biases split with their projections).
return require("slapo.schedules.llama")
