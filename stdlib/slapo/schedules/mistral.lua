--- Tensor parallelism for MistralForCausalLM: LLaMA's module names and shapes, so LLaMA's
--- schedule (the sliding window needs no sync: each rank masks its own heads).
return require("slapo.schedules.llama")
