#!/usr/bin/python3
"""What veritrain's fixed TorchScript executor costs in step time (docs/training.md,
"TorchScript's executor"), in Debian's Python torch, whose LibTorch is the one veritrain links.

    bench/script_executor.py [--steps 30] [--rounds 5] [--json]

For each module: one training step (forward, cross-entropy, backward, SGD with momentum) on a
batch of 16, timed under LibTorch's default profiling executor (after its warm-up calls, when it
runs the optimised graph) and with graph-executor optimisation off (what veritrain runs), in
alternating rounds; one intra-op thread. Prints per module the median step of each and
`fixed_vs_default` = default time / fixed time (1.0: no cost; below 1: the fixed executor is
slower).
"""
import argparse
import json
import statistics
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


class LeNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.c1 = nn.Conv2d(3, 6, 5); self.c2 = nn.Conv2d(6, 16, 5)
        self.f1 = nn.Linear(400, 120); self.f2 = nn.Linear(120, 84); self.f3 = nn.Linear(84, 10)

    def forward(self, x):
        x = F.avg_pool2d(torch.tanh(self.c1(x)), 2); x = F.avg_pool2d(torch.tanh(self.c2(x)), 2)
        return self.f3(torch.tanh(self.f2(torch.tanh(self.f1(x.flatten(1))))))


class Gates(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = nn.Conv2d(3, 8, 3, padding=1); self.fc = nn.Linear(8 * 16 * 16, 10)

    def forward(self, x):
        h = F.max_pool2d(F.silu(self.c(x)), 2)
        h = h * torch.sigmoid(h) * torch.softmax(h.flatten(2), -1).view_as(h)
        return self.fc(h.flatten(1))


class Lstm(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.LSTM(32, 64, batch_first=True); self.fc = nn.Linear(64, 10)

    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.1, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2); self.fc = nn.Linear(32, 10)

    def forward(self, x):
        return self.fc(self.enc(x).mean(1))


MODELS = {
    "lenet5": (LeNet, (16, 3, 32, 32)),
    "gates": (Gates, (16, 3, 32, 32)),
    "lstm": (Lstm, (16, 16, 32)),
    "transformer_encoder": (Encoder, (16, 16, 32)),
}


def step_ms(make, shape, optimize, steps):
    torch._C._set_graph_executor_optimize(optimize)
    torch.manual_seed(0)
    m = torch.jit.script(make())
    opt = torch.optim.SGD(m.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(shape); y = torch.arange(shape[0]) % 10

    def step():
        opt.zero_grad()
        F.cross_entropy(m(x), y).backward()
        opt.step()

    for _ in range(5):  # the profiling executor's warm-up calls
        step()
    start = time.perf_counter()
    for _ in range(steps):
        step()
    return (time.perf_counter() - start) * 1e3 / steps


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    torch.set_num_threads(1)
    out = {}
    for name, (make, shape) in MODELS.items():
        default, fixed = [], []
        for _ in range(args.rounds):
            default.append(step_ms(make, shape, True, args.steps))
            fixed.append(step_ms(make, shape, False, args.steps))
        d, f = statistics.median(default), statistics.median(fixed)
        out[name] = {"default_ms": round(d, 3), "fixed_ms": round(f, 3),
                     "fixed_vs_default": round(d / f, 3)}
    if args.json:
        print(json.dumps(out, indent=1))
        return
    print("%-20s %12s %12s %18s" % ("module", "default ms", "fixed ms", "fixed_vs_default"))
    for name, r in out.items():
        print("%-20s %12.3f %12.3f %18.3f" % (name, r["default_ms"], r["fixed_ms"],
                                               r["fixed_vs_default"]))


if __name__ == "__main__":
    main()
