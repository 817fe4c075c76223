"""Plain PyTorch eager models with the Hugging Face module structure of BertLMHeadModel and
GPT2LMHeadModel (the same layers, shapes, tying and loss as slapo-lua's zoo), for timing the same
training step in Python. Written for bench/; not a copy of transformers.

Usage: /usr/bin/python3 bench/reference/hf_models.py gpt2|bert [batch] [seq] [repeats] [width] [layers]
Prints "MODEL SECONDS PEAK_RSS_MIB" (median of repeats after 2 warm-up steps; the process's peak).
"""
import math
import statistics
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def causal_lm_loss(logits, labels):
    return F.cross_entropy(logits[:, :-1].reshape(-1, logits.size(-1)), labels[:, 1:].reshape(-1), ignore_index=-100)


def attention(q, k, v, head_dim, causal):
    b, s, _ = q.shape
    q, k, v = (t.view(b, s, -1, head_dim).transpose(1, 2) for t in (q, k, v))
    scores = q @ k.transpose(-1, -2) / math.sqrt(head_dim)
    if causal:
        mask = torch.ones(s, s, dtype=torch.bool).triu(1)
        scores = scores.masked_fill(mask, torch.finfo(scores.dtype).min)
    out = torch.softmax(scores, -1) @ v
    return out.transpose(1, 2).reshape(b, s, -1)


class Conv1D(nn.Module):
    def __init__(self, nx, nf):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(nx, nf) * 0.02)
        self.bias = nn.Parameter(torch.zeros(nf))

    def forward(self, x):
        return torch.addmm(self.bias, x.reshape(-1, x.size(-1)), self.weight).view(*x.shape[:-1], -1)


class GPT2Block(nn.Module):
    def __init__(self, h, heads):
        super().__init__()
        self.head_dim = h // heads
        self.ln_1, self.ln_2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.c_attn, self.attn_proj = Conv1D(h, 3 * h), Conv1D(h, h)
        self.c_fc, self.mlp_proj = Conv1D(h, 4 * h), Conv1D(4 * h, h)

    def forward(self, x):
        q, k, v = self.c_attn(self.ln_1(x)).chunk(3, -1)
        x = x + self.attn_proj(attention(q, k, v, self.head_dim, True))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2LMHeadModel(nn.Module):
    def __init__(self, vocab=50257, h=768, layers=4, heads=12, positions=1024):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(vocab, h), nn.Embedding(positions, h)
        self.h = nn.ModuleList(GPT2Block(h, heads) for _ in range(layers))
        self.ln_f = nn.LayerNorm(h)
        self.lm_head = nn.Linear(h, vocab, bias=False)
        self.lm_head.weight = self.wte.weight

    def forward(self, ids, labels):
        x = self.wte(ids) + self.wpe(torch.arange(ids.size(1)).unsqueeze(0))
        for block in self.h:
            x = block(x)
        return causal_lm_loss(self.lm_head(self.ln_f(x)), labels)


class BertLayer(nn.Module):
    def __init__(self, h, heads, inner):
        super().__init__()
        self.head_dim = h // heads
        self.query, self.key, self.value = nn.Linear(h, h), nn.Linear(h, h), nn.Linear(h, h)
        self.attn_out, self.ln_1 = nn.Linear(h, h), nn.LayerNorm(h, eps=1e-12)
        self.intermediate, self.output, self.ln_2 = nn.Linear(h, inner), nn.Linear(inner, h), nn.LayerNorm(h, eps=1e-12)

    def forward(self, x):
        a = attention(self.query(x), self.key(x), self.value(x), self.head_dim, False)
        x = self.ln_1(self.attn_out(a) + x)
        return self.ln_2(self.output(F.gelu(self.intermediate(x))) + x)


class BertLMHeadModel(nn.Module):
    def __init__(self, vocab=30522, h=768, layers=4, heads=12, inner=3072, positions=512):
        super().__init__()
        self.word, self.position, self.token_type = nn.Embedding(vocab, h), nn.Embedding(positions, h), nn.Embedding(2, h)
        self.ln = nn.LayerNorm(h, eps=1e-12)
        self.layer = nn.ModuleList(BertLayer(h, heads, inner) for _ in range(layers))
        self.transform, self.transform_ln = nn.Linear(h, h), nn.LayerNorm(h, eps=1e-12)
        self.decoder = nn.Linear(h, vocab)
        self.decoder.weight = self.word.weight

    def forward(self, ids, labels):
        x = self.word(ids) + self.token_type(torch.zeros_like(ids)) + self.position(torch.arange(ids.size(1)).unsqueeze(0))
        x = self.ln(x)
        for layer in self.layer:
            x = layer(x)
        logits = self.decoder(self.transform_ln(F.gelu(self.transform(x))))
        return causal_lm_loss(logits, labels)


def peak_rss_mib():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024


def main():
    args = sys.argv[1:] + ["gpt2", "2", "128", "5", "768", "4"][len(sys.argv) - 1:]
    kind, batch, seq, repeats, width, layers = args[0], int(args[1]), int(args[2]), int(args[3]), int(args[4]), int(args[5])
    torch.manual_seed(0)
    if kind == "gpt2":
        model = GPT2LMHeadModel(h=width, layers=layers, heads=width // 64)
    else:
        model = BertLMHeadModel(h=width, layers=layers, heads=width // 64, inner=4 * width)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4, weight_decay=0.0)
    ids = torch.randint(0, 1000, (batch, seq))
    samples = []
    for i in range(2 + repeats):
        start = time.perf_counter()
        optimizer.zero_grad()
        model(ids, ids).backward()
        optimizer.step()
        if i >= 2:
            samples.append(time.perf_counter() - start)
    print(kind, statistics.median(samples), peak_rss_mib())


if __name__ == "__main__":
    main()
