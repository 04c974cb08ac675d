#!/usr/bin/env python3
"""veritrain's kernels for the operators of docs/portable.md ("More functions", "Operators of real
models") against reference/portable_ops_ref.py, the numpy reference written from that page, bit for
bit: every output element must have the reference's bit pattern, or both be NaN (any payload).

    ops_ref_test.py PROBE SCRIPTS_DIR [--op NAME] [--seed N] [--cases N] [--keep-going]

For each operator it builds random small cases (shapes and parameters drawn at random; inputs
mixing normal values with ties, +0 and −0, subnormals, ±inf, NaN and large magnitudes; integer
targets always valid) and runs `PROBE DIR` on each: the probe reads DIR/spec.json
({"op", "params", "inputs": {name: {"dtype": "f32"|"i64", "shape"}}}) and DIR/<input>.bin (raw
little-endian), and writes DIR/out.json ({"outputs": {name: {"dtype": "f32", "shape"}}}) and
DIR/out/<name>.bin. --op runs one operator (`act`, `reduce`, ...) or one variant (`act:tanh`,
`reduce:amax`); --seed changes every case (each operator draws from its own generator, so --op
reproduces the full run's cases); --cases scales the number of cases. The first mismatch prints
the operator, the case's parameters, the output, the flat index and both values (bits and
float), keeps the case's folder for `PROBE DIR`, and exits 1 (--keep-going: after all operators).
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zlib

import numpy as np

F = np.float32
MAX_SHOWN = 5  # mismatching elements printed per output


def nan_bits(bits):
    return np.array([bits], np.uint32).view(F)[0]


# Special values: zeros of both signs, subnormals (the smallest, a middle one, the largest),
# the smallest normal, infinities, NaNs of both signs, large magnitudes.
SPECIALS = np.array([0.0, -0.0, 1e-45, -1e-45, 2.5e-39, -7.3e-40, 1.1754942e-38, -1.17549435e-38,
                     np.inf, -np.inf, np.nan, nan_bits(0xFFC00001), 3.4028235e38, -3.4028235e38,
                     1e30, -2e25, 1e-30, 8e3], F)
TIES = np.array([0.0, -0.0, 1.0, -1.0, 2.0, 0.5, -2.0], F)


# --------------------------------------------------------------------------------------------
# Values
# --------------------------------------------------------------------------------------------
class Gen:
    """Random shapes, parameters and values for one operator."""

    def __init__(self, seed, name):
        self.rng = np.random.default_rng([seed, zlib.crc32(name.encode())])

    def int(self, lo, hi):
        """An integer in [lo, hi]."""
        return int(self.rng.integers(lo, hi + 1))

    def choice(self, options):
        return options[int(self.rng.integers(0, len(options)))]

    def bool(self):
        return bool(self.rng.integers(0, 2))

    def f32(self, v):
        """A parameter as its binary32 value (both sides round it anyway)."""
        return float(F(v))

    def normal(self, shape, scale=1.0):
        return (self.rng.standard_normal(shape) * scale).astype(F)

    def wide(self, shape):
        """Magnitudes spread over the whole binary32 range, subnormals included."""
        mag = np.exp2(self.rng.uniform(-149, 127.9, shape))
        return (np.where(self.rng.random(shape) < 0.5, -mag, mag)).astype(F)

    def inject(self, a, rate, pool):
        a = np.array(a, F)
        mask = self.rng.random(a.shape) < rate
        a[mask] = self.rng.choice(pool, int(mask.sum()))
        return a

    def values(self, shape, flavor, scale=1.0):
        """flavor: "clean" (normal values), "ties" (many equal values, ±0), "special" (a few
        specials), "wild" (wide magnitudes and many specials)."""
        a = self.normal(shape, scale)
        if flavor == "ties":
            a = self.inject(a, 0.5, TIES)
        elif flavor == "special":
            a = self.inject(self.inject(a, 0.15, TIES), 0.1, SPECIALS)
        elif flavor == "wild":
            a = self.inject(self.wide(shape), 0.25, SPECIALS)
        return a

    def state(self):
        """A dropout stream state (docs/portable.md, "Random numbers") as a decimal string."""
        return str(ref_base.stream_state(self.int(0, 1 << 30), 5, (self.int(0, 99) << 20) ^ self.int(0, 3)))


FLAVORS = ("clean", "ties", "special", "wild")


def near(values):
    """Each value, its neighbours one ulp away and its negation: a function's branch points."""
    v = np.array(values, F)
    v = np.concatenate([v, -v])
    return np.concatenate([v, np.nextafter(v, F(np.inf)), np.nextafter(v, F(-np.inf))]).astype(F)


# --------------------------------------------------------------------------------------------
# Cases: each returns (variant, params, inputs); inputs name -> array (float32, or int64)
# --------------------------------------------------------------------------------------------
ACT_PARAMS = {
    "hardtanh": lambda g: dict(zip(("min_val", "max_val"), g.choice([(-1.0, 1.0), (0.0, 6.0), (-2.5, 0.5)]))),
    "leaky_relu": lambda g: {"slope": g.choice([0.01, 0.2, -0.3, 1.5])},
    "elu": lambda g: {"alpha": g.choice([1.0, 0.5, 2.0])},
    "celu": lambda g: {"alpha": g.choice([1.0, 0.5, 2.0, 3.0])},
    "hardshrink": lambda g: {"alpha": g.choice([0.5, 0.0, 1.25, 3.0])},
    "softshrink": lambda g: {"alpha": g.choice([0.5, 0.0, 1.25, 3.0])},
    "threshold": lambda g: dict(zip(("threshold", "alpha"), g.choice([(0.1, 20.0), (0.0, 0.0), (-1.5, -7.0), (2.0, -0.0)]))),
    "softplus": lambda g: dict(zip(("beta", "threshold"), g.choice([(1.0, 20.0), (2.0, 5.0), (0.5, 3.0), (1.0, 1.0)]))),
}
ACT_EDGES = [0.0, 1e-45, 0.625, 3.0, 6.0, 1.0, 20.0, 5.0, 2.5, 0.5, 44.3, 88.72283935546875, 89.0,
             103.97208, 104.0, 15.0, 9.0, 8.3, 1e-20, 0.3]


def case_act(g, k, fn):
    params = {"fn": fn}
    params.update({n: g.f32(v) for n, v in ACT_PARAMS.get(fn, lambda g: {})(g).items()})
    flavor = FLAVORS[k % 4]
    if k % 5 == 4:  # the branch points, densely
        edges = ACT_EDGES + [abs(v) for n, v in params.items() if n != "fn"]
        if fn == "softplus":
            edges.append(params["threshold"] / params["beta"])
        x = near(edges)
        x = x[g.rng.permutation(x.size)]
    else:
        shape = g.choice([(g.int(1, 64),), (g.int(1, 4), g.int(1, 16))])
        x = g.values(shape, flavor, 4.0)
    dy = g.values(x.shape, "clean" if k % 3 else "special")
    return "act:" + fn, params, {"x": x, "dy": dy}


def pool_params(g, dilate):
    for _ in range(1000):
        h, w = g.int(1, 9), g.int(1, 9)
        kernel = [g.int(1, 3), g.int(1, 3)]
        stride = [g.int(1, 3), g.int(1, 3)]
        padding = [g.int(0, kernel[0] // 2), g.int(0, kernel[1] // 2)]
        dilation = [g.int(1, 2), g.int(1, 2)] if dilate else [1, 1]
        ceil_mode = g.bool()
        out = [ops.pool_out_size(s, kk, st, p, d, ceil_mode)
               for s, kk, st, p, d in zip((h, w), kernel, stride, padding, dilation)]
        if min(out) >= 1:
            return (h, w), kernel, stride, padding, dilation, ceil_mode, out
    raise RuntimeError("no pooling parameters")


def planes(g):
    return g.int(1, 2), g.int(1, 3)


def case_max_pool2d(g, k):
    b, c = planes(g)
    (h, w), kernel, stride, padding, dilation, ceil_mode, out = pool_params(g, True)
    params = {"kernel": kernel, "stride": stride, "padding": padding, "dilation": dilation,
              "ceil_mode": ceil_mode}
    x = g.values((b, c, h, w), ("ties", "ties", "special", "wild", "clean")[k % 5])
    return "max_pool2d", params, {"x": x, "dy": g.values((b, c) + tuple(out), "clean")}


def case_avg_pool2d(g, k):
    b, c = planes(g)
    (h, w), kernel, stride, padding, _, ceil_mode, out = pool_params(g, False)
    params = {"kernel": kernel, "stride": stride, "padding": padding, "ceil_mode": ceil_mode,
              "count_include_pad": g.bool(), "divisor_override": g.choice([0, 0, 0, 3, 7])}
    x = g.values((b, c, h, w), FLAVORS[k % 4])
    dy = g.values((b, c) + tuple(out), "clean" if k % 2 else "special")
    return "avg_pool2d", params, {"x": x, "dy": dy}


def case_adaptive(g, k, op):
    b, c = planes(g)
    h, w = g.int(1, 9), g.int(1, 9)
    out = [g.int(1, h + 1), g.int(1, w + 1)] if k % 4 else [1, 1]
    flavor = (("ties", "special", "clean", "wild") if op.endswith("max_pool2d") else FLAVORS)[k % 4]
    x = g.values((b, c, h, w), flavor)
    dy = g.values((b, c) + tuple(out), "clean" if k % 3 else "special")
    return op, {"output": out}, {"x": x, "dy": dy}


def case_upsample(g, k):
    """Both align_corners, an output size (up, down, equal) or a scale factor (the ratio then
    1 / factor rounded once), one-row and one-column planes included."""
    b, c = planes(g)
    h, w = g.int(1, 6), g.int(1, 6)
    if k % 3 == 2:
        factor = [g.choice([0.5, 1.5, 2.0, 3.0, 1.3]), g.choice([2.0, 0.75, 2.5])]
        out = [max(1, int(h * factor[0])), max(1, int(w * factor[1]))]
        factor = [out[0] / h if int(h * factor[0]) == 0 else factor[0],
                  out[1] / w if int(w * factor[1]) == 0 else factor[1]]
    else:
        factor = [0.0, 0.0]
        out = [g.int(1, 2 * h + 2), g.int(1, 2 * w + 2)]
    x = g.values((b, c, h, w), FLAVORS[k % 4])
    dy = g.values((b, c) + tuple(out), "clean" if k % 3 else "special")
    return "upsample_bilinear2d", {"align_corners": k % 2 == 1, "scale_factor": factor}, {"x": x, "dy": dy}


def case_nearest(g, k):
    """1-d, 2-d and 3-d; an output size (up, down, equal) or a scale factor."""
    b, c = planes(g)
    size = [g.int(1, 5) for _ in range(1 + k % 3)]
    if k % 2:
        factor = [g.choice([0.5, 1.5, 2.0, 3.0, 1.3]) for _ in size]
        out = [max(1, int(n * f)) for n, f in zip(size, factor)]
        factor = [o / n if int(n * f) == 0 else f for n, o, f in zip(size, out, factor)]
    else:
        factor = [0.0 for _ in size]
        out = [g.int(1, 2 * n + 2) for n in size]
    x = g.values((b, c) + tuple(size), FLAVORS[k % 4])
    dy = g.values((b, c) + tuple(out), "clean" if k % 3 else "special")
    return "upsample_nearest", {"scale_factor": factor}, {"x": x, "dy": dy}


def conv_params(g, k, transposed):
    """Shapes and parameters for conv and conv_transpose, cycling through the forms that pick
    different arithmetic: the flipped-kernel dx (stride 1, padding ≤ k − 1, dilation 1), the dcol
    dx through a stride, a dilation or a padding past k − 1, 3-d, depthwise."""
    form = k % 7
    for _ in range(1000):
        groups = g.choice([1, 1, 2, 3])
        cin, cout = groups * g.int(1, 2), groups * g.int(1, 2)
        if form == 5:  # depthwise
            cout = cin = groups
        three = form in (3, 4)
        size = [g.int(2, 4) if three else 1, g.int(2, 6), g.int(2, 6)]
        kernel = [g.int(1, 2) if three else 1, g.int(1, 3), g.int(1, 3)]
        dims = range(3) if three else range(1, 3)
        stride, padding, dilation, outpad = [1, 1, 1], [0, 0, 0], [1, 1, 1], [0, 0, 0]
        for n in dims:
            padding[n] = g.int(0, kernel[n] - 1)
            if form == 1 or form == 4 or form == 6:
                stride[n] = g.int(1, 3)
            if form == 2 or form == 4:
                dilation[n] = g.int(1, 3)
            if form == 6 or (form == 4 and g.bool()):
                padding[n] = g.int(0, kernel[n] + 1)
            if transposed:
                outpad[n] = g.int(0, stride[n] - 1)
        if form == 2 and dilation == [1, 1, 1]:
            dilation[2] = 2
        if form == 6 and stride == [1, 1, 1] and all(padding[n] <= kernel[n] - 1 for n in range(3)):
            padding[2] = kernel[2]
        if transposed:
            out = [(size[n] - 1) * stride[n] - 2 * padding[n] + dilation[n] * (kernel[n] - 1) + outpad[n] + 1
                   for n in range(3)]
        else:
            out = [ops.conv_out_size(size[n], kernel[n], stride[n], padding[n], dilation[n]) for n in range(3)]
        if min(out) >= 1:
            return groups, cin, cout, size, kernel, stride, padding, dilation, outpad, out
    raise RuntimeError("no convolution parameters")


def case_conv(g, k, transposed=False):
    groups, cin, cout, size, kernel, stride, padding, dilation, outpad, out = conv_params(g, k, transposed)
    b = g.int(1, 2)
    flavor = ("clean", "clean", "ties", "clean", "special", "clean", "ties", "wild")[k % 8]
    params = {"stride": stride, "padding": padding, "dilation": dilation, "groups": groups}
    if transposed:
        params["output_padding"] = outpad
        wshape = [cin, cout // groups] + kernel
    else:
        wshape = [cout, cin // groups] + kernel
    inputs = {"x": g.values([b, cin] + size, flavor),
              "w": g.values(wshape, "clean" if k % 8 != 7 else "special", 0.5)}
    if k % 3 != 2:
        inputs["bias"] = g.values([cout], "clean" if k % 2 else "ties")
    inputs["dy"] = g.values([b, cout] + out, "clean" if k % 4 != 3 else "special")
    return ("conv_transpose" if transposed else "conv"), params, inputs


def case_bmm(g, k):
    n, m, kk, p = g.int(1, 3), g.int(1, 5), g.int(1, 6), g.int(1, 5)
    alpha, beta = g.choice([(1.0, 1.0), (0.5, 2.0), (-1.5, 0.25), (1.0, 0.0), (0.1, -3.0), (2.0, 1.0)])
    flavor = ("clean", "ties", "clean", "special", "wild", "clean")[k % 6]
    inputs = {"a": g.values((n, m, kk), flavor), "b": g.values((n, kk, p), "clean" if k % 2 else flavor)}
    if k % 4 != 3:
        inputs["c"] = g.values((n, m, p), "clean" if k % 3 else "special")
    inputs["dy"] = g.values((n, m, p), "clean" if k % 5 else "special")
    return "bmm", {"alpha": g.f32(alpha), "beta": g.f32(beta)}, inputs


def case_reduce(g, k, fn):
    nd = g.int(1, 4)
    shape = [g.int(1, 4) for _ in range(nd)]
    dims = [int(d) for d in g.rng.choice(nd, g.int(1, nd), replace=False)]  # any order
    keepdim = g.bool()
    flavor = (("ties", "ties", "special", "clean", "wild") if fn == "amax" else
              ("clean", "ties", "special", "clean", "wild"))[k % 5]
    x = g.values(shape, flavor, 3.0)
    kept = [d for d in range(nd) if d not in dims]
    out = [1 if d in dims else shape[d] for d in range(nd)] if keepdim else [shape[d] for d in kept]
    dy = g.values(out, "clean" if k % 3 else "special")
    return "reduce:" + fn, {"fn": fn, "dims": dims, "keepdim": keepdim}, {"x": x, "dy": dy}


def case_softmax(g, k, op):
    nd = g.int(1, 3)
    shape = [g.int(1, 5) for _ in range(nd)]
    x = g.values(shape, ("clean", "ties", "special", "clean", "wild")[k % 5], 4.0)
    if k % 5 == 3:  # rows past exp's range
        x = (x * F(40.0)).astype(F)
    dy = g.values(shape, "clean" if k % 3 else "special")
    return op, {"dim": g.int(0, nd - 1)}, {"x": x, "dy": dy}


def case_group_norm(g, k):
    groups = g.int(1, 3)
    b, c = g.int(1, 2), groups * g.int(1, 3)
    spatial = [g.int(1, 4) for _ in range(g.int(0, 2))]
    flavor = ("clean", "ties", "clean", "special", "clean")[k % 5]
    x = g.values([b, c] + spatial, flavor, 2.0)
    if k % 5 == 2:
        x = (x + F(1000.0)).astype(F)  # a large mean: cancellation in x ⊖ mean
    inputs = {"x": x, "w": g.values([c], "clean"), "b": g.values([c], "clean" if k % 2 else "ties"),
              "dy": g.values([b, c] + spatial, "clean" if k % 4 != 3 else "special")}
    return "group_norm", {"groups": groups, "eps": g.f32(g.choice([1e-5, 1e-3, 0.1]))}, inputs


def targets(g, n, c, ignore=None, rate=0.0):
    t = g.rng.integers(0, c, n).astype(np.int64)
    if ignore is not None:
        t[g.rng.random(n) < rate] = ignore
    return t


def case_nll_loss(g, k):
    n, c = g.int(1, 6), g.int(1, 5)
    ignore = g.choice([-100, 0, c - 1])
    rate = 1.0 if k % 6 == 5 else 0.3  # every row ignored: R = 0
    logp = g.values((n, c), ("clean", "ties", "special", "clean", "wild", "clean")[k % 6], 2.0)
    params = {"ignore_index": ignore, "g": g.f32(g.choice([1.0, 0.5, 0.25, 3.0]))}
    return "nll_loss", params, {"logp": logp, "target": targets(g, n, c, ignore, rate)}


def case_cross_entropy(g, k):
    n, c = g.int(1, 6), g.int(1, 6)
    smoothing = (0.0, 0.1, 0.25, 0.0, 0.1, 0.05)[k % 6]
    logits = g.values((n, c), ("clean", "clean", "ties", "special", "wild", "clean")[k % 6], 3.0)
    params = {"smoothing": g.f32(smoothing), "g": g.f32(g.choice([1.0, 0.5, 0.25]))}
    return "cross_entropy", params, {"logits": logits, "target": targets(g, n, c)}


def case_bce_logits(g, k):
    shape = [g.int(1, 5) for _ in range(g.int(1, 2))]
    x = g.values(shape, ("clean", "ties", "special", "wild", "clean")[k % 5], 4.0)
    y = g.rng.random(shape).astype(F)
    y = g.inject(y, 0.3, np.array([0.0, 1.0, 0.5], F))  # valid targets: in [0, 1]
    return "bce_logits", {"g": g.f32(g.choice([1.0, 0.5]))}, {"x": x, "target": y}


def case_rnn(g, k, op, projected=False):
    lstm = op == "lstm"
    layers, bidirectional = ((1, False), (2, True), (1, True), (2, False))[k % 4]
    t, b, i, h = g.int(1, 4), g.int(1, 3), g.int(1, 4), g.int(1, 3)
    proj = g.int(1, 3) if projected else 0  # an LSTM's proj_size: h is `w` wide, c `h`
    w = proj or h
    dirs = 2 if bidirectional else 1
    kk = {"lstm": 4, "gru": 3}.get(op, 1)
    scale = 8.0 if k % 5 == 4 else 1.0  # saturated gates
    flavor = "special" if k % 5 == 3 else "clean"
    inputs = {"x": g.values((t, b, i), flavor, scale), "h0": g.values((layers * dirs, b, w), "clean", 0.5)}
    if lstm:
        inputs["c0"] = g.values((layers * dirs, b, h), "clean", 0.5)
    for layer in range(layers):
        width = i if layer == 0 else dirs * w
        for s in ("", "_reverse")[:dirs]:
            inputs["w_ih_l%d%s" % (layer, s)] = g.values((kk * h, width), "clean", 0.6)
            inputs["w_hh_l%d%s" % (layer, s)] = g.values((kk * h, w), "clean", 0.6)
            inputs["b_ih_l%d%s" % (layer, s)] = g.values((kk * h,), "clean", 0.3)
            inputs["b_hh_l%d%s" % (layer, s)] = g.values((kk * h,), "clean", 0.3)
            if proj:
                inputs["w_hr_l%d%s" % (layer, s)] = g.values((proj, h), "clean", 0.6)
    inputs["dy"] = g.values((t, b, dirs * w), "clean" if k % 5 != 2 else "ties")
    inputs["dhn"] = g.values((layers * dirs, b, w), "clean")
    if lstm:
        inputs["dcn"] = g.values((layers * dirs, b, h), "clean")
    params = {"layers": layers, "bidirectional": bidirectional, "hidden": h}
    if proj:
        params["proj"] = proj
    return op, params, inputs


def case_feature_dropout(g, k):
    shape = [g.int(1, 3), g.int(1, 6)] + [g.int(1, 4) for _ in range(g.int(1, 2))]
    p = (0.5, 0.2, 0.9, 0.0, 1.0, 0.5)[k % 6]
    params = {"p": g.f32(p), "state": g.state(), "call": g.choice([0, 1, 2, 7, 1000])}
    x = g.values(shape, ("clean", "special", "ties", "wild", "clean", "clean")[k % 6])
    return "feature_dropout", params, {"x": x, "dy": g.values(shape, "clean" if k % 2 else "special")}


def case_bernoulli(g, k):
    shape = [g.int(1, 8) for _ in range(g.int(1, 3))]
    p = (0.5, 0.25, 0.0, 1.0, 0.999, 0.1)[k % 6]
    params = {"p": g.f32(p), "state": g.state(), "call": g.choice([0, 1, 3, 1 << 20])}
    return "bernoulli", params, {"x": g.values(shape, "special")}


def case_uniform(g, k):
    shape = [g.int(1, 8) for _ in range(g.int(1, 3))]
    params = {"state": g.state(), "call": g.choice([0, 1, 3, 1 << 20])}
    return "uniform", params, {"x": g.values(shape, "special")}


def case_bernoulli_of(g, k):
    # Probabilities in [0, 1] and past it, ±0, subnormals, ±inf and NaN ("special").
    shape = [g.int(4, 16) for _ in range(g.int(1, 3))]
    params = {"state": g.state(), "call": g.choice([0, 1, 3, 1 << 20])}
    flavor = ("clean", "special", "ties", "wild")[k % 4]
    return "bernoulli_of", params, {"x": g.values(shape, flavor)}


def case_normal(g, k):
    # Up to 64³ values: past a thread's share of the kernel, every quarter of the cosine.
    shape = [g.int(1, 64) for _ in range(g.int(1, 3))]
    params = {"state": g.state(), "call": g.choice([0, 1, 3, 1 << 20])}
    return "normal", params, {"x": g.values(shape, "special")}


ACT_FNS = ("sigmoid", "tanh", "silu", "hardtanh", "hardsigmoid", "hardswish", "leaky_relu", "elu",
           "gelu_tanh", "softplus", "selu", "celu", "mish", "log_sigmoid", "hardshrink", "softshrink",
           "threshold", "exp", "log")
# (variant, operator, cases at --cases 1, generator)
SUITE = ([("act:" + fn, "act", 5, lambda g, k, fn=fn: case_act(g, k, fn)) for fn in ACT_FNS] + [
    ("max_pool2d", "max_pool2d", 8, case_max_pool2d),
    ("avg_pool2d", "avg_pool2d", 8, case_avg_pool2d),
    ("adaptive_avg_pool2d", "adaptive_avg_pool2d", 5, lambda g, k: case_adaptive(g, k, "adaptive_avg_pool2d")),
    ("adaptive_max_pool2d", "adaptive_max_pool2d", 5, lambda g, k: case_adaptive(g, k, "adaptive_max_pool2d")),
    ("upsample_bilinear2d", "upsample_bilinear2d", 10, case_upsample),
    ("upsample_nearest", "upsample_nearest", 9, case_nearest),
    ("conv", "conv", 10, case_conv),
    ("conv_transpose", "conv_transpose", 8, lambda g, k: case_conv(g, k, True)),
    ("bmm", "bmm", 6, case_bmm)] +
    [("reduce:" + fn, "reduce", 5, lambda g, k, fn=fn: case_reduce(g, k, fn))
     for fn in ("sum", "mean", "amax", "logsumexp")] + [
    ("softmax", "softmax", 5, lambda g, k: case_softmax(g, k, "softmax")),
    ("log_softmax", "log_softmax", 5, lambda g, k: case_softmax(g, k, "log_softmax")),
    ("group_norm", "group_norm", 5, case_group_norm),
    ("nll_loss", "nll_loss", 6, case_nll_loss),
    ("cross_entropy", "cross_entropy", 6, case_cross_entropy),
    ("bce_logits", "bce_logits", 5, case_bce_logits),
    ("lstm", "lstm", 5, lambda g, k: case_rnn(g, k, "lstm")),
    ("lstm_proj", "lstm", 5, lambda g, k: case_rnn(g, k, "lstm", True)),
    ("gru", "gru", 5, lambda g, k: case_rnn(g, k, "gru")),
    ("rnn_tanh", "rnn_tanh", 5, lambda g, k: case_rnn(g, k, "rnn_tanh")),
    ("rnn_relu", "rnn_relu", 5, lambda g, k: case_rnn(g, k, "rnn_relu")),
    ("feature_dropout", "feature_dropout", 6, case_feature_dropout),
    ("bernoulli", "bernoulli", 6, case_bernoulli),
    ("uniform", "uniform", 4, case_uniform),
    ("normal", "normal", 6, case_normal),
    ("bernoulli_of", "bernoulli_of", 6, case_bernoulli_of)])


# --------------------------------------------------------------------------------------------
# Running a case
# --------------------------------------------------------------------------------------------
class Mismatch(Exception):
    pass


def jsonable(v):
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v)
    return v


def write_case(folder, op, params, inputs):
    spec = {"op": op, "params": {k: jsonable(v) for k, v in params.items()}, "inputs": {}}
    for name, a in inputs.items():
        if a.dtype == np.int64:
            dtype, raw = "i64", a.astype("<i8").tobytes()
        else:
            dtype, raw = "f32", a.astype("<f4").tobytes()
        spec["inputs"][name] = {"dtype": dtype, "shape": list(a.shape)}
        with open(os.path.join(folder, name + ".bin"), "wb") as f:
            f.write(raw)
    with open(os.path.join(folder, "spec.json"), "w") as f:
        json.dump(spec, f, indent=1)
    return spec


def read_outputs(folder):
    with open(os.path.join(folder, "out.json")) as f:
        meta = json.load(f)["outputs"]
    out = {}
    for name, m in meta.items():
        if m.get("dtype") != "f32":
            raise Mismatch("output %s: dtype %r, not f32" % (name, m.get("dtype")))
        shape = tuple(m["shape"])
        raw = open(os.path.join(folder, "out", name + ".bin"), "rb").read()
        count = int(np.prod(shape, dtype=np.int64))
        if len(raw) != 4 * count:
            raise Mismatch("output %s: %d bytes for shape %s" % (name, len(raw), list(shape)))
        out[name] = np.frombuffer(raw, "<f4").astype(F).reshape(shape)
    return out


def show(v):
    b = int(np.array([v], F).view(np.uint32)[0])
    return "0x%08x (%r)" % (b, float(v))


def compare(expected, got):
    """Per output: (elements compared, list of mismatch lines)."""
    problems, compared = [], 0
    missing, extra = sorted(set(expected) - set(got)), sorted(set(got) - set(expected))
    if missing or extra:
        problems.append("outputs differ: missing %s, unexpected %s" % (missing, extra))
    for name in sorted(set(expected) & set(got)):
        e, g = expected[name], got[name]
        if e.shape != g.shape:
            problems.append("output %s: shape %s, reference %s" % (name, list(g.shape), list(e.shape)))
            continue
        e1, g1 = e.reshape(-1), g.reshape(-1)
        same = (e1.view(np.uint32) == g1.view(np.uint32)) | (np.isnan(e1) & np.isnan(g1))
        compared += e1.size
        bad = np.flatnonzero(~same)
        if bad.size:
            problems.append("output %s: %d of %d elements differ" % (name, bad.size, e1.size))
            for i in bad[:MAX_SHOWN]:
                where = np.unravel_index(i, e.shape) if e.ndim else ()
                problems.append("  %s flat %d %s: probe %s, reference %s"
                                % (name, i, list(map(int, where)), show(g1[i]), show(e1[i])))
    return compared, problems


def describe(spec):
    shapes = ", ".join("%s%s" % (n, i["shape"]) for n, i in spec["inputs"].items())
    return "params %s; inputs %s" % (json.dumps(spec["params"]), shapes)


def run_case(probe, scratch, variant, op, params, inputs, expected):
    folder = tempfile.mkdtemp(prefix=variant.replace(":", "_") + ".", dir=scratch)
    spec = write_case(folder, op, params, inputs)
    os.makedirs(os.path.join(folder, "out"), exist_ok=True)
    try:
        proc = subprocess.run([probe, folder], capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return folder, spec, 0, ["the probe ran past 120 s"]
    if proc.returncode != 0:
        return folder, spec, 0, ["the probe exited %d: %s" % (proc.returncode, proc.stderr.strip()[-2000:])]
    try:
        got = read_outputs(folder)
    except (OSError, ValueError, KeyError, Mismatch) as e:
        return folder, spec, 0, ["the probe's outputs: %s" % e]
    compared, problems = compare(expected, got)
    return folder, spec, compared, problems


def load(scripts):
    """The reference (reference/portable_ops_ref.py) and the primitives it shares (portable_ref.py)."""
    global ops, ref_base
    sys.path.insert(0, os.path.abspath(scripts))
    import portable_ops_ref
    import portable_ref
    ops, ref_base = portable_ops_ref, portable_ref


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("probe")
    ap.add_argument("scripts")
    ap.add_argument("--op", help="an operator (act, reduce, conv, ...) or a variant (act:tanh, reduce:amax)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=float, default=1.0, help="scale the number of cases")
    ap.add_argument("--keep-going", action="store_true", help="run every operator before failing")
    args = ap.parse_args()
    load(args.scripts)
    suite = [s for s in SUITE if args.op in (None, s[0], s[1], s[0].split(":")[-1])]
    if not suite:
        print("ops_ref_test: no operator %r (have: %s)" % (args.op, ", ".join(s[0] for s in SUITE)), file=sys.stderr)
        return 2
    scratch = tempfile.mkdtemp(prefix="ops_ref_test.")
    start, failed = time.time(), []
    for variant, op, count, make in suite:
        g = Gen(args.seed, variant)
        cases = max(1, int(round(count * args.cases)))
        tensors = elements = 0
        for k in range(cases):
            for _ in range(100):  # parameters the page leaves undefined are drawn again
                _, params, inputs = make(g, k)
                try:
                    expected = ops.run(op, params, inputs)
                    break
                except ops.Undefined:
                    continue
            else:
                raise RuntimeError("%s: no defined case in 100 draws" % variant)
            folder, spec, compared, problems = run_case(args.probe, scratch, variant, op, params, inputs, expected)
            if problems:
                print("MISMATCH %s, case %d (seed %d): %s" % (variant, k, args.seed, describe(spec)))
                for line in problems:
                    print("  " + line)
                print("  the case is kept in %s (rerun: %s %s)" % (folder, args.probe, folder))
                failed.append(variant)
                break
            shutil.rmtree(folder)
            tensors += len(expected)
            elements += compared
        else:
            print("%-22s %3d cases, %4d outputs, %7d values: bit for bit" % (variant + ":", cases, tensors, elements))
            continue
        if not args.keep_going:
            return 1
    if not failed:
        shutil.rmtree(scratch, ignore_errors=True)
    print("%d operators in %.1f s%s" % (len(suite), time.time() - start,
                                       ", failed: " + " ".join(failed) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
