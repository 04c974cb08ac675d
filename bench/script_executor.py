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
import os
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from requestor_nets import Encoder, Gates, LeNet, Lstm  # noqa: E402


MODELS = {
    "lenet5": (LeNet, (16, 3, 32, 32)),
    "gates": (Gates, (16, 3, 32, 32)),
    "lstm": (lambda: Lstm(32, 64), (16, 16, 32)),
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
