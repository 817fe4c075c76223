"""One training step of a Hugging Face transformers model on the GPU, timed, for bench/gpu/run.

Usage: python bench/gpu/hf_step.py MODEL BATCH SEQ PRECISION [ATTN] [COMPILE]
  MODEL: bert-large | gpt2 | tinyllama; PRECISION: fp32 | bf16 (weights) | bf16-autocast
  ATTN: eager | sdpa (default sdpa); COMPILE: 0 | 1 (torch.compile the model)
Prints "SECONDS PEAK_GIB": the mean of 10 steps after 3 (step = zero_grad + forward + backward +
AdamW (lr 1e-4, weight decay 0, torch's default multi-tensor AdamW), random tokens, labels = ids),
and the peak of allocated CUDA memory.
"""
import sys
import time

import torch
import transformers


def config_for(name):
    if name == "bert-large":  # BertLMHeadModel: the causal-LM loss slapo-lua's zoo BERT computes
        return transformers.BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                       intermediate_size=4096, is_decoder=True)
    if name == "gpt2":
        return transformers.GPT2Config()
    if name == "tinyllama":
        return transformers.LlamaConfig(hidden_size=2048, intermediate_size=5632, num_hidden_layers=22,
                                        num_attention_heads=32, num_key_value_heads=4, vocab_size=32000,
                                        max_position_embeddings=2048, rms_norm_eps=1e-5)
    raise SystemExit(f"hf_step.py: unknown model {name} (bert-large, gpt2, tinyllama)")


def main():
    name, batch, seq, precision = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
    attn = sys.argv[5] if len(sys.argv) > 5 else "sdpa"
    compile_model = len(sys.argv) > 6 and sys.argv[6] == "1"
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    config = config_for(name)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation=attn).cuda()
    if precision == "bf16":
        model = model.to(torch.bfloat16)
    model.train()
    step_model = torch.compile(model) if compile_model else model
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    ids = torch.randint(0, config.vocab_size, (batch, seq), device="cuda")

    def step():
        optimizer.zero_grad()
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=precision == "bf16-autocast"):
            loss = step_model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(10):
        step()
    torch.cuda.synchronize()
    print((time.perf_counter() - start) / 10, torch.cuda.max_memory_allocated() / 2**30)


if __name__ == "__main__":
    main()
