#!/usr/bin/python3
"""Plain PyTorch training of the zoo gpt's architecture (training/model/models.cpp): the peer
bench_scale measures veritrain's memory and step time against. The same shapes (token and
position embeddings, pre-norm blocks of causal attention and a GELU MLP, a final norm and an
untied head), AdamW, random tokens; no veritrain code. Prints one JSON line: the process's peak
resident set (VmHWM) and the median step time."""

import argparse
import json
import math
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, d, heads, ratio):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
        self.fc, self.out = nn.Linear(d, ratio * d), nn.Linear(ratio * d, d)
        self.heads = heads

    def attention(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(x).split(d, dim=2)
        shape = (b, t, self.heads, d // self.heads)
        q, k, v = (z.view(shape).transpose(1, 2) for z in (q, k, v))
        scores = q @ k.transpose(-2, -1) / math.sqrt(d // self.heads)
        mask = torch.ones(t, t, dtype=torch.bool).triu(1)
        attn = scores.masked_fill(mask, float("-inf")).softmax(-1) @ v
        return self.proj(attn.transpose(1, 2).reshape(b, t, d))

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class Gpt(nn.Module):
    def __init__(self, vocab, d, layers, heads, seq, ratio):
        super().__init__()
        self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
        self.blocks = nn.ModuleList(Block(d, heads, ratio) for _ in range(layers))
        self.ln_f, self.head = nn.LayerNorm(d), nn.Linear(d, vocab)

    def forward(self, tokens):
        x = self.tok(tokens) + self.pos(torch.arange(tokens.shape[1]))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln_f(x))


def peak_rss_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__)
    for name, default in [("vocab", 8192), ("d_model", 512), ("layers", 8), ("heads", 8),
                          ("seq_len", 128), ("mlp_ratio", 4), ("batch", 8), ("steps", 3),
                          ("threads", 1)]:
        p.add_argument("--" + name.replace("_", "-"), type=int, default=default)
    a = p.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    model = Gpt(a.vocab, a.d_model, a.layers, a.heads, a.seq_len, a.mlp_ratio)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    times = []
    for _ in range(a.steps):
        tokens = torch.randint(0, a.vocab, (a.batch, a.seq_len + 1))
        start = time.perf_counter()
        logits = model(tokens[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, a.vocab), tokens[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - start)
    params = sum(t.numel() for t in model.parameters())
    print(json.dumps({"parameters": params, "peak_rss_bytes": peak_rss_bytes(),
                      "step_seconds": statistics.median(times[1:] or times),
                      "torch": torch.__version__}))


if __name__ == "__main__":
    main()
