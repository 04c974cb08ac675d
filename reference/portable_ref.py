#!/usr/bin/env python3
"""Replays portable-mode epochs (docs/portable.md) with numpy float32 alone: no torch at all.

    portable_ref.py TASK.json BEFORE.safetensors AFTER.safetensors [more jobs ...]
    portable_ref.py --init TASK.json EPOCH0.safetensors OUT.safetensors [more jobs ...]

Replays the epoch after BEFORE (a canonical snapshot) and writes the state after it as canonical
safetensors (docs/snapshot.md); --init builds epoch 0 from the task seed, taking only the
`__metadata__` and the LibTorch generator bytes (`rng/cpu`, carried but never drawn from in
portable mode) of EPOCH0. Covers the zoo models mlp, cnn, conv3d and gpt on synthetic data with
every optimizer, schedule and gradient-group count. Every sum is a chain in the documented
order, every operation one rounded binary32 operation (a product chain's fused multiply-add
computed exactly in float64 and rounded once to binary32, `fma` below), written from the docs
page and sharing no code with veritrain: agreeing with it bit for bit means the page is complete.
Exit status: 0 written, 3 a task it does not cover, 2 bad input.
"""
import json
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ref_common import (GOLDEN, augment_draw, blobs, epoch_order, images, learning_rate, mix,  # noqa: E402
                        power, read_safetensors, split_jobs, tokens, volumes, write_safetensors)

F = np.float32
NOT_COVERED, BAD_INPUT = 3, 2
STREAM_DROPOUT, STREAM_INIT = 5, 6
np.seterr(all="ignore")  # inf and NaN are values here, as in IEEE


class NotCovered(Exception):
    pass


# --- a chain: s = +0.0; s = s + x_i in order -----------------------------------------------
def chain(x, axis=0):
    """The chain over `axis` (np.add.accumulate is one sequential float32 loop per output)."""
    x = np.moveaxis(np.asarray(x, dtype=F), axis, 0)
    zero = np.zeros((1,) + x.shape[1:], dtype=F)
    return np.add.accumulate(np.concatenate([zero, x]), axis=0, dtype=F)[-1]


def fma(a, b, c):
    """a·b + c in float32 rounded once (IEEE 754 fusedMultiplyAdd), from float64 operations.

    a·b is exact in float64 (24 + 24 bits). Rounding a·b + c to float64 and then to float32 could
    round twice the wrong way, so the float64 sum is taken *to odd* first: an inexact sum whose
    last bit is even moves one float64 step towards the exact value (TwoSum gives the sign of
    what was lost). Rounding to odd at 53 bits and then to nearest at 24 is the correctly
    rounded result (53 >= 24 + 2; Boldo and Melquiond, "Emulation of FMA and correctly rounded
    sums: proved algorithms using rounding to odd", IEEE TC 2008)."""
    p = np.asarray(a, np.float64) * np.asarray(b, np.float64)
    c = np.asarray(c, np.float64)
    s = p + c
    virtual_c = s - p
    lost = (p - (s - virtual_c)) + (c - virtual_c)
    even = (s.view(np.int64) & 1) == 0
    to_odd = (lost != 0) & even & np.isfinite(s)
    s = np.where(to_odd, np.nextafter(s, np.where(lost > 0, np.inf, -np.inf)), s)
    return s.astype(F)


def mm(a, b, start=None):
    """a [..., M, K] · b [..., K, N]: every output one chain over k of fused multiply-adds."""
    out = np.zeros(a.shape[:-1] + (b.shape[-1],), F) if start is None else start.astype(F)
    for k in range(a.shape[-1]):
        out = fma(a[..., :, k:k + 1], b[..., k:k + 1, :], out)
    return out


# --- functions (docs/portable.md, "Functions") -------------------------------------------
def bits(u):
    return np.asarray(u, dtype=np.uint32).view(F)


def pow2(e):
    return bits((np.asarray(e, dtype=np.int64) + 127).astype(np.uint32) << np.uint32(23))


EXP_POLY = (1.3981999507e-3, 8.3334519073e-3, 4.1665795894e-2, 1.6666665459e-1, 5.0000001201e-1)
LOG_POLY = (-1.1514610310e-1, 1.1676998740e-1, -1.2420140846e-1, 1.4249322787e-1, -1.6668057665e-1,
            2.0000714765e-1, -2.4999993993e-1, 3.3333331174e-1)
ERF_POLY = (-1.453152027, 1.421413741, -0.284496736, 0.254829592)


def vt_exp(x):
    x = np.asarray(x, dtype=F)
    kf = np.floor(x * F(1.44269502162933349609375) + F(0.5))
    r = (x - kf * F(0.693359375)) - kf * F(-2.12194440e-4)
    p = np.full_like(x, F(1.9875691500e-4))
    for c in EXP_POLY:
        p = p * r + F(c)
    y = ((p * r) * r + r) + F(1.0)
    k = np.nan_to_num(kf, nan=0.0, posinf=0.0, neginf=0.0).astype(np.int64)
    normal = y * pow2(np.clip(k, -126, 127))
    high = (y * pow2(127)) * F(2.0)
    low = (y * pow2(np.clip(k + 64, -126, 127))) * pow2(-64)
    out = np.where(k > 127, high, np.where(k < -126, low, normal))
    out = np.where(x < F(-103.972084045410), F(0.0), out)
    out = np.where(x > F(88.72283935546875), F(np.inf), out)
    return np.where(np.isnan(x), x, out).astype(F)


def vt_log(x):
    x = np.asarray(x, dtype=F)
    sub = x < F(1.17549435e-38)
    xs = np.where(sub, x * F(8388608.0), x)
    u = xs.view(np.uint32).astype(np.int64)
    e = np.where(sub, -23, 0) + (u >> 23) - 127
    m = bits((u & 0x007FFFFF) | 0x3F800000)
    big = m > F(1.41421356)
    m = np.where(big, m * F(0.5), m)
    e = np.where(big, e + 1, e)
    f = m - F(1.0)
    zz = f * f
    y = np.full_like(f, F(7.0376836292e-2))
    for c in LOG_POLY:
        y = y * f + F(c)
    y = (y * f) * zz
    ef = e.astype(F)
    y = y + ef * F(-2.12194440e-4)
    y = y + F(-0.5) * zz
    r = (f + y) + ef * F(0.693359375)
    r = np.where(x == F(np.inf), F(np.inf), r)
    r = np.where(x == F(0.0), F(-np.inf), r)
    return np.where(np.isnan(x) | (x < F(0.0)), F(np.nan), r).astype(F)


def vt_erf(x):
    x = np.asarray(x, dtype=F)
    a = np.abs(x)
    t = F(1.0) / (F(1.0) + F(0.3275911) * a)
    p = np.full_like(x, F(1.061405429))
    for c in ERF_POLY:
        p = p * t + F(c)
    y = F(1.0) - (p * t) * vt_exp(-(a * a))
    y = np.where(x < F(0.0), -y, y)
    return np.where(np.isnan(x), x, y).astype(F)


def gelu(x):
    return (F(0.5) * x) * (F(1.0) + vt_erf(x * F(0.707106781186547524)))


def gelu_grad(x):
    e = vt_erf(x * F(0.707106781186547524))
    density = vt_exp(F(-0.5) * (x * x)) * F(0.398942280401432678)
    return F(0.5) * (F(1.0) + e) + x * density


# --- random numbers (docs/portable.md, "Random numbers") ---------------------------------
def stream_state(seed, a, b):
    return mix(mix(seed ^ 0x657269747261696E) ^ a) ^ mix((b + GOLDEN) & ((1 << 64) - 1))


def draws_at(state, counters):
    """The stream's 64-bit draws at `counters` (SplitMix64 of state + (counter + 1)·γ)."""
    z = np.uint64(state) + (counters.astype(np.uint64) + np.uint64(1)) * np.uint64(GOLDEN)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def uniforms_at(state, counters):
    return (draws_at(state, counters) >> np.uint64(40)).astype(F) * F(1.0 / 16777216.0)


# --- operators: forward returns (y, saved), backward takes the upstream gradient ---------
def linear(x, w, b):
    y = mm(x.reshape(-1, x.shape[-1]), w.T)
    if b is not None:
        y = y + b
    return y.reshape(x.shape[:-1] + (w.shape[0],))


def linear_backward(x, w, dy, want_dx=True):
    x2, dy2 = x.reshape(-1, x.shape[-1]), dy.reshape(-1, dy.shape[-1])
    dx = mm(dy2, w).reshape(x.shape) if want_dx else None
    return dx, mm(dy2.T, x2), chain(dy2, 0)


def relu(x):
    return np.where(x <= F(0.0), F(0.0), x).astype(F)


def relu_backward(y, dy):
    return np.where(y <= F(0.0), F(0.0), dy).astype(F)


def conv_shape(x, w, stride, pad):
    spatial = x.shape[2:]
    k = w.shape[2:]
    return [(spatial[d] + 2 * pad[d] - k[d]) // stride[d] + 1 for d in range(len(spatial))]


def columns(xb, w, stride, pad, out):
    """Example b's column matrix: rows (c, taps in order), columns (output positions)."""
    dims = len(out)
    xp = np.pad(xb, [(0, 0)] + [(p, p) for p in pad])
    k = w.shape[2:]
    rows = []
    for c in range(xb.shape[0]):
        for tap in np.ndindex(*k):
            sl = tuple(slice(tap[d], tap[d] + stride[d] * out[d], stride[d]) for d in range(dims))
            rows.append(xp[(c,) + sl].reshape(-1))
    return np.stack(rows).astype(F)


def conv(x, w, b, stride, pad):
    out = conv_shape(x, w, stride, pad)
    w2 = w.reshape(w.shape[0], -1)
    y = np.stack([mm(w2, columns(x[i], w, stride, pad, out)) for i in range(x.shape[0])])
    if b is not None:
        y = y + b[None, :, None]
    return y.reshape((x.shape[0], w.shape[0]) + tuple(out))


def conv_backward(x, w, dy, stride, pad, want_dx, has_bias):
    out = conv_shape(x, w, stride, pad)
    w2 = w.reshape(w.shape[0], -1)
    dy3 = dy.reshape(dy.shape[0], dy.shape[1], -1)
    dw = None
    for i in range(x.shape[0]):  # dw's chain continues from example to example
        dw = mm(dy3[i], columns(x[i], w, stride, pad, out).T, dw)
    db = chain(dy3.transpose(1, 0, 2).reshape(dy.shape[1], -1), 1) if has_bias else None
    dx = None
    k = w.shape[2:]
    if want_dx and all(st == 1 for st in stride) and all(p <= kk - 1 for p, kk in zip(pad, k)):
        # The convolution of dy by the transposed, flipped weights, padding k - 1 - p.
        spatial = tuple(range(2, w.ndim))
        flipped = np.ascontiguousarray(np.flip(w.transpose((1, 0) + spatial), axis=spatial))
        dx = conv(dy, flipped, None, stride, [kk - 1 - p for kk, p in zip(k, pad)])
    elif want_dx:
        dims = len(out)
        dx = np.zeros(x.shape, F)
        for i in range(x.shape[0]):
            dcol = mm(w2.T, dy3[i]).reshape((x.shape[1], -1) + tuple(out))
            padded = np.zeros((x.shape[1],) + tuple(s + 2 * p for s, p in zip(x.shape[2:], pad)), F)
            for t, tap in enumerate(np.ndindex(*k)):
                sl = tuple(slice(tap[d], tap[d] + stride[d] * out[d], stride[d]) for d in range(dims))
                padded[(slice(None),) + sl] = padded[(slice(None),) + sl] + dcol[:, t]
            inner = tuple(slice(p, p + s) for p, s in zip(pad, x.shape[2:]))
            dx[i] = padded[(slice(None),) + inner]
    return dx, dw.reshape(w.shape), db


def lanes(v):
    """A batch norm's sum along the last axis: value n to lane n mod 16, each lane a chain, then
    the lanes summed pairwise, (0 + 1), (2 + 3), ..., and those pairwise again."""
    pad = -v.shape[-1] % 16  # +0.0 added to a lane changes nothing
    v = np.concatenate([v, np.zeros(v.shape[:-1] + (pad,), F)], axis=-1)
    t = chain(v.reshape(v.shape[:-1] + (-1, 16)), -2)
    while t.shape[-1] > 1:
        t = t[..., 0::2] + t[..., 1::2]
    return t[..., 0]


def row_chain(v):
    return chain(v, -1)


def moments(v, n, total=row_chain):
    """mean and biased variance along the last axis, as two sums (chains unless told)."""
    count = F(n)
    mean = total(v) / count
    d = v - mean[..., None]
    return mean, total(d * d) / count


def batch_norm(x, p, prefix, state, training, eps=F(1e-5), momentum=F(0.1)):
    c = x.shape[1]
    v = x.transpose(1, 0, 2, 3).reshape(c, -1)  # each channel's values in (b, h, w) order
    n = v.shape[1]
    w, b = p[prefix + "weight"], p[prefix + "bias"]
    if not training:
        rm, rv = state["buffer/" + prefix + "running_mean"], state["buffer/" + prefix + "running_var"]
        inv = F(1.0) / np.sqrt(rv + eps)
        y = ((v - rm[:, None]) * inv[:, None]) * w[:, None] + b[:, None]
        return y.reshape(c, x.shape[0], *x.shape[2:]).transpose(1, 0, 2, 3), None
    mean, var = moments(v, n, lanes)
    inv = F(1.0) / np.sqrt(var + eps)
    xhat = (v - mean[:, None]) * inv[:, None]
    y = xhat * w[:, None] + b[:, None]
    keep, count = F(1.0) - momentum, F(n)
    unbias = count / (count - F(1.0))
    for name, stat in (("running_mean", mean), ("running_var", var * unbias)):
        key = "buffer/" + prefix + name
        state[key] = keep * state[key] + momentum * stat
    key = "buffer/" + prefix + "num_batches_tracked"
    state[key] = state[key] + np.int64(1)
    return y.reshape(c, x.shape[0], *x.shape[2:]).transpose(1, 0, 2, 3), (v, mean, inv, w)


def norm_backward(v, mean, inv, w, g, n, total=row_chain):
    """Rows of v ([rows, n]) normalized with per-row mean/inv and per-row (BN) or per-column
    (LN) weight `w` broadcast as given; returns dx and x̂, S1 and S2 summed by `total`."""
    count = F(n)
    xhat = (v - mean[:, None]) * inv[:, None]
    dxhat = g * w
    s1, s2 = total(dxhat), total(dxhat * xhat)
    dx = (inv / count)[:, None] * (((count * dxhat) - s1[:, None]) - xhat * s2[:, None])
    return dx, xhat


def batch_norm_backward(saved, dy, grads, prefix):
    v, mean, inv, w = saved
    c = dy.shape[1]
    g = dy.transpose(1, 0, 2, 3).reshape(c, -1)
    dx, xhat = norm_backward(v, mean, inv, w[:, None], g, v.shape[1], lanes)
    grads[prefix + "bias"] = lanes(g)
    grads[prefix + "weight"] = lanes(g * xhat)
    return dx.reshape(c, dy.shape[0], *dy.shape[2:]).transpose(1, 0, 2, 3)


def layer_norm(x, w, b, eps=F(1e-5)):
    v = x.reshape(-1, x.shape[-1])
    mean, var = moments(v, v.shape[1])
    inv = F(1.0) / np.sqrt(var + eps)
    y = ((v - mean[:, None]) * inv[:, None]) * w + b
    return y.reshape(x.shape), (v, mean, inv, w)


def layer_norm_backward(saved, dy, grads, prefix):
    v, mean, inv, w = saved
    g = dy.reshape(v.shape)
    dx, xhat = norm_backward(v, mean, inv, w[None, :], g, v.shape[1])
    grads[prefix + "weight"] = chain(g * xhat, 0)
    grads[prefix + "bias"] = chain(g, 0)
    return dx.reshape(dy.shape)


def dropout(x, p, state, call):
    if p == 0.0:
        return x, None
    j = np.arange(x.size, dtype=np.uint64) + (np.uint64(call) << np.uint64(40))
    kept = (uniforms_at(state, j) >= F(p)).reshape(x.shape)
    scale = F(1.0) / (F(1.0) - F(p))
    return np.where(kept, x * scale, F(0.0)).astype(F), (kept, scale)


def dropout_backward(saved, dy):
    if saved is None:
        return dy
    kept, scale = saved
    return np.where(kept, dy * scale, F(0.0)).astype(F)


def softmax_causal(s, divisor):
    t = s.shape[-1]
    z = s / divisor
    valid = np.tril(np.ones((t, t), dtype=bool))
    m = np.max(np.where(valid, z, F(-np.inf)), axis=-1)
    e = np.where(valid, vt_exp(z - m[..., None]), F(0.0))
    total = chain(e, -1)  # masked keys add +0.0 after the valid ones: no change
    return np.where(valid, e / total[..., None], F(0.0)).astype(F)


def softmax_causal_backward(p, dp, divisor):
    t = p.shape[-1]
    valid = np.tril(np.ones((t, t), dtype=bool))
    dot = chain(np.where(valid, dp * p, F(0.0)), -1)
    return np.where(valid, (p * (dp - dot[..., None])) / divisor, F(0.0)).astype(F)


def cross_entropy(logits, targets):
    rows = logits.shape[0]
    m = np.max(logits, axis=1)
    s = chain(vt_exp(logits - m[:, None]), 1)
    lse = m + vt_log(s)
    loss = chain(lse - logits[np.arange(rows), targets]) / F(rows)
    return loss, (logits, targets, m, s)


def cross_entropy_backward(saved, g):
    logits, targets, m, s = saved
    scale = F(g) / F(logits.shape[0])
    p = vt_exp(logits - m[:, None]) / s[:, None]
    p[np.arange(logits.shape[0]), targets] -= F(1.0)
    return p * scale


def mse(a, b):
    d = (a - b).reshape(-1)
    return chain(d * d) / F(d.size), (a, b)


def mse_backward(saved, g):
    a, b = saved
    return (a - b) * ((F(2.0) * F(g)) / F(a.size))


# --- models: parameters `p` by name, buffers in `state`, gradients into `grads` ---------
class Mlp:
    def __init__(self, o):
        self.layers = o["layers"]

    def forward(self, p, state, x, training, key):
        h, saved = x.reshape(x.shape[0], -1), []
        for i in range(self.layers + 1):
            name = "body.%d." % (2 * i)
            out = linear(h, p[name + "weight"], p[name + "bias"])
            if i < self.layers:
                out = relu(out)
            saved.append((name, h, out))  # the layer's input, and its output after ReLU
            h = out
        return h, saved

    def backward(self, p, saved, dy, grads):
        for i in reversed(range(self.layers + 1)):
            name, h, out = saved[i]
            if i < self.layers:
                dy = relu_backward(out, dy)
            dy, grads[name + "weight"], grads[name + "bias"] = linear_backward(h, p[name + "weight"], dy, i > 0)


class ResNet:
    def __init__(self, o):
        w, k = o["width"], o["blocks"]
        self.blocks = [(w, w, 1)] * k + [(w, 2 * w, 2)] + [(2 * w, 2 * w, 1)] * (k - 1)

    def forward(self, p, state, x, training, key):
        saved = {}
        c = conv(x, p["stem.weight"], None, (1, 1), (1, 1))
        b, saved["stem_bn"] = batch_norm(c, p, "stem_bn.", state, training)
        h = relu(b)
        saved["stem"] = (x, h)
        for i, (cin, cout, stride) in enumerate(self.blocks):
            pre = "stages.%d." % i
            c1 = conv(h, p[pre + "conv1.weight"], None, (stride, stride), (1, 1))
            z1, bn1 = batch_norm(c1, p, pre + "bn1.", state, training)
            a1 = relu(z1)
            c2 = conv(a1, p[pre + "conv2.weight"], None, (1, 1), (1, 1))
            z2, bn2 = batch_norm(c2, p, pre + "bn2.", state, training)
            short = None
            if stride != 1 or cin != cout:
                cs = conv(h, p[pre + "shortcut.0.weight"], None, (stride, stride), (0, 0))
                s, short = batch_norm(cs, p, pre + "shortcut.1.", state, training)
            else:
                s = h
            out = relu(z2 + s)
            saved[i] = (h, bn1, a1, bn2, short, out, stride)
            h = out
        pooled = chain(h.reshape(h.shape[0], h.shape[1], -1), -1) / F(h.shape[2] * h.shape[3])
        saved["head"] = (pooled, h.shape)
        return linear(pooled, p["head.weight"], p["head.bias"]), saved

    def backward(self, p, saved, dy, grads):
        pooled, shape = saved["head"]
        dpool, grads["head.weight"], grads["head.bias"] = linear_backward(pooled, p["head.weight"], dy)
        dh = np.broadcast_to((dpool / F(shape[2] * shape[3]))[:, :, None, None], shape).astype(F)
        for i in reversed(range(len(self.blocks))):
            h, bn1, a1, bn2, short, out, stride = saved[i]
            pre = "stages.%d." % i
            dsum = relu_backward(out, dh)
            dc2 = batch_norm_backward(bn2, dsum, grads, pre + "bn2.")
            da1, grads[pre + "conv2.weight"], _ = conv_backward(a1, p[pre + "conv2.weight"], dc2, (1, 1), (1, 1), True, False)
            dc1 = batch_norm_backward(bn1, relu_backward(a1, da1), grads, pre + "bn1.")
            dh1, grads[pre + "conv1.weight"], _ = conv_backward(h, p[pre + "conv1.weight"], dc1, (stride, stride), (1, 1), True, False)
            if short is not None:
                dcs = batch_norm_backward(short, dsum, grads, pre + "shortcut.1.")
                dhs, grads[pre + "shortcut.0.weight"], _ = conv_backward(
                    h, p[pre + "shortcut.0.weight"], dcs, (stride, stride), (0, 0), True, False)
            else:
                dhs = dsum
            dh = dh1 + dhs  # two consumers: one addition, either order
        x, h = saved["stem"]
        dstem = batch_norm_backward(saved["stem_bn"], relu_backward(h, dh), grads, "stem_bn.")
        _, grads["stem.weight"], _ = conv_backward(x, p["stem.weight"], dstem, (1, 1), (1, 1), False, False)


class Conv3dNet:
    def __init__(self, o):
        pass

    def forward(self, p, state, x, training, key):
        saved, h = [], x
        for i in range(3):
            name = "body.%d." % (2 * i)
            y = relu(conv(h, p[name + "weight"], p[name + "bias"], (1, 1, 1), (1, 1, 1)))
            saved.append((name, h, y))
            h = y
        return h, saved

    def backward(self, p, saved, dy, grads):
        for i in reversed(range(3)):
            name, h, y = saved[i]
            dx, grads[name + "weight"], grads[name + "bias"] = conv_backward(
                h, p[name + "weight"], relu_backward(y, dy), (1, 1, 1), (1, 1, 1), i > 0, True)
            dy = dx


class Gpt:
    def __init__(self, o):
        self.o = o
        self.heads, self.layers = o["heads"], o["layers"]
        self.p_drop = F(o["dropout_permille"] / 1000.0)

    def drop(self, x, training, key):
        if not training or float(self.p_drop) == 0.0:
            return x, None
        y, saved = dropout(x, float(self.p_drop), key["state"], key["calls"])
        key["calls"] += 1
        return y, saved

    def forward(self, p, state, x, training, key):
        b, t = x.shape
        d = self.o["d_model"]
        h_, dh = self.heads, d // self.heads
        divisor = F(math.sqrt(float(dh)))
        emb = p["tok.weight"][x] + p["pos.weight"][np.arange(t)][None]
        saved, h = {"emb": x}, emb
        for i in range(self.layers):
            pre = "block%d." % i
            n1, ln1 = layer_norm(h, p[pre + "ln1.weight"], p[pre + "ln1.bias"])
            qkv = linear(n1, p[pre + "qkv.weight"], p[pre + "qkv.bias"])
            parts = qkv.reshape(b, t, 3, h_, dh)
            q = parts[:, :, 0].transpose(0, 2, 1, 3).reshape(b * h_, t, dh)
            kt = parts[:, :, 1].transpose(0, 2, 3, 1).reshape(b * h_, dh, t)
            v = parts[:, :, 2].transpose(0, 2, 1, 3).reshape(b * h_, t, dh)
            probs = softmax_causal(mm(q, kt), divisor)
            pd, drop_p = self.drop(probs, training, key)
            o = mm(pd, v).reshape(b, h_, t, dh).transpose(0, 2, 1, 3).reshape(b, t, d)
            a = linear(o, p[pre + "proj.weight"], p[pre + "proj.bias"])
            ad, drop_a = self.drop(a, training, key)
            mid = h + ad
            n2, ln2 = layer_norm(mid, p[pre + "ln2.weight"], p[pre + "ln2.bias"])
            f = linear(n2, p[pre + "fc.weight"], p[pre + "fc.bias"])
            g = gelu(f)
            m = linear(g, p[pre + "out.weight"], p[pre + "out.bias"])
            md, drop_m = self.drop(m, training, key)
            saved[i] = (ln1, n1, q, kt, v, probs, pd, drop_p, o, drop_a, ln2, n2, f, g, drop_m)
            h = mid + md
        nf, lnf = layer_norm(h, p["ln_f.weight"], p["ln_f.bias"])
        saved["final"] = (lnf, nf)
        return linear(nf, p["lm_head.weight"], p["lm_head.bias"]), saved

    def backward(self, p, saved, dy, grads):
        lnf, nf = saved["final"]
        dnf, grads["lm_head.weight"], grads["lm_head.bias"] = linear_backward(nf, p["lm_head.weight"], dy)
        dh = layer_norm_backward(lnf, dnf, grads, "ln_f.")
        d = self.o["d_model"]
        divisor = F(math.sqrt(float(d // self.heads)))
        for i in reversed(range(self.layers)):
            pre = "block%d." % i
            (ln1, n1, q, kt, v, probs, pd, drop_p, o, drop_a, ln2, n2, f, g, drop_m) = saved[i]
            b, t = dh.shape[0], dh.shape[1]
            dm = dropout_backward(drop_m, dh)
            dg, grads[pre + "out.weight"], grads[pre + "out.bias"] = linear_backward(g, p[pre + "out.weight"], dm)
            df = dg * gelu_grad(f)
            dn2, grads[pre + "fc.weight"], grads[pre + "fc.bias"] = linear_backward(n2, p[pre + "fc.weight"], df)
            dmid = dh + layer_norm_backward(ln2, dn2, grads, pre + "ln2.")
            da = dropout_backward(drop_a, dmid)
            do, grads[pre + "proj.weight"], grads[pre + "proj.bias"] = linear_backward(o, p[pre + "proj.weight"], da)
            h_, dh_ = self.heads, d // self.heads
            do3 = do.reshape(b, t, h_, dh_).transpose(0, 2, 1, 3).reshape(b * h_, t, dh_)
            dpd = mm(do3, v.transpose(0, 2, 1))
            dv = mm(pd.transpose(0, 2, 1), do3)
            ds = softmax_causal_backward(probs, dropout_backward(drop_p, dpd), divisor)
            dq = mm(ds, kt.transpose(0, 2, 1))
            dkt = mm(q.transpose(0, 2, 1), ds)
            dqkv = np.zeros((b, t, 3, h_, dh_), F)  # each gradient copied into its place
            dqkv[:, :, 0] = dq.reshape(b, h_, t, dh_).transpose(0, 2, 1, 3)
            dqkv[:, :, 1] = dkt.reshape(b, h_, dh_, t).transpose(0, 3, 1, 2)
            dqkv[:, :, 2] = dv.reshape(b, h_, t, dh_).transpose(0, 2, 1, 3)
            dn1, grads[pre + "qkv.weight"], grads[pre + "qkv.bias"] = linear_backward(
                n1, p[pre + "qkv.weight"], dqkv.reshape(b, t, 3 * d))
            dh = dmid + layer_norm_backward(ln1, dn1, grads, pre + "ln1.")
        tokens_in = saved["emb"]
        t = tokens_in.shape[1]
        dpos_rows = chain(dh, 0)  # the positions' share: one chain over the batch
        grads["tok.weight"] = embedding_backward(tokens_in.reshape(-1), dh.reshape(-1, d), p["tok.weight"].shape[0])
        grads["pos.weight"] = embedding_backward(np.arange(t), dpos_rows, p["pos.weight"].shape[0])


def embedding_backward(ids, dy, rows):
    out = np.zeros((rows, dy.shape[-1]), F)
    for i, r in enumerate(ids):
        out[r] = out[r] + dy[i]
    return out


MODELS = {"mlp": Mlp, "cnn": ResNet, "conv3d": Conv3dNet, "gpt": Gpt}


# --- initial weights (docs/portable.md, "Initial weights") -------------------------------
def init_rule(model, name, shape):
    """('fan_in', n) | ('normal',) | ('ones',) | ('zeros',) for parameter `name`."""
    if model == "gpt" and name in ("tok.weight", "pos.weight"):
        return ("normal",)
    norm = any(part in name for part in ("bn", "ln", "shortcut.1.")) and len(shape) == 1
    if norm:
        return ("ones",) if name.endswith("weight") else ("zeros",)
    return ("fan_in",)


def initial_params(task, shapes):
    model, seed = task["model"]["name"], task.get("seed", 0)
    names = sorted(shapes, key=lambda s: s.encode())
    fan_in = {n[:-len("weight")]: int(np.prod(shapes[n][1:])) for n in names if n.endswith("weight") and len(shapes[n]) > 1}
    out = {}
    for i, name in enumerate(names):
        shape, rule = shapes[name], init_rule(model, name, shapes[name])
        count = int(np.prod(shape))
        state = stream_state(seed, STREAM_INIT, i)
        if rule[0] == "fan_in":
            bound = F(1.0) / np.sqrt(F(fan_in[name.rsplit(".", 1)[0] + "."]))
            u = uniforms_at(state, np.arange(count, dtype=np.uint64))
            values = (u * F(2.0) - F(1.0)) * bound
        elif rule[0] == "normal":
            u = uniforms_at(state, np.arange(4 * count, dtype=np.uint64)).reshape(count, 4)
            values = ((((u[:, 0] + u[:, 1]) + u[:, 2]) + u[:, 3]) - F(2.0)) * F(1.7320508)
        else:
            values = np.full(count, F(1.0 if rule[0] == "ones" else 0.0))
        out[name] = values.astype(F).reshape(shape)
    return out


# --- the epoch ---------------------------------------------------------------------------
def load_task(path):
    task = json.load(open(path))
    model = task["model"]["name"]
    if task.get("determinism") != "portable":
        raise NotCovered("the task's determinism is %r, not portable" % task.get("determinism", "exact"))
    if model not in MODELS or task["dataset"]["name"] != "synthetic":
        raise NotCovered("portable_ref covers the zoo on synthetic data; this task is %s on %s"
                         % (model, task["dataset"]["name"]))
    task.setdefault("optimizer", {})
    task.setdefault("schedule", {})
    for k, v in {"name": "sgd", "lr": 0.01, "momentum": 0.0, "nesterov": False, "weight_decay": 0.0,
                 "beta1": 0.9, "beta2": 0.999, "eps": 1e-8}.items():
        task["optimizer"].setdefault(k, v)
    for k, v in {"name": "constant", "step_size": 1, "gamma": 0.1, "min_lr": 0.0, "warmup_steps": 0}.items():
        task["schedule"].setdefault(k, v)
    return task


def dataset(task):
    o, seed = task["model"]["options"], task.get("seed", 0)
    samples = task["dataset"]["options"]["samples"]
    name = task["model"]["name"]
    if name == "mlp":
        return blobs(seed, samples, o["input_dim"], o["classes"])
    if name == "cnn":
        return images(seed, samples, o["classes"])
    if name == "conv3d":
        return volumes(seed, samples, o["size"])
    return tokens(seed, samples, o["vocab"], o["seq_len"])


def step_loss(task, net, p, state, x, y, step, group):
    """The loss of one forward pass, and its backward: upstream g -> parameter gradients."""
    key = {"state": stream_state(task.get("seed", 0), STREAM_DROPOUT, (step << 20) ^ group), "calls": 0}
    out, saved = net.forward(p, state, x, True, key)
    if task.get("loss", "cross_entropy") == "mse":
        loss, lsaved = mse(out, y)
        upstream = lambda g: mse_backward(lsaved, g)  # noqa: E731
    elif task.get("loss_options", {}).get("label_smoothing", 0.0) > 0.0:
        # "Losses, further forms" (docs/portable.md): the smoothed loss and its gradient.
        import portable_ops_ref as ops  # noqa: E402 (it imports this module)
        eps = task["loss_options"]["label_smoothing"]
        logits, classes = out.reshape(-1, out.shape[-1]), y.reshape(-1)
        loss = ops.cross_entropy(logits, classes, eps, F(1.0))["loss"]
        upstream = lambda g: ops.cross_entropy(logits, classes, eps, g)["dlogits"].reshape(out.shape)  # noqa: E731
    else:
        loss, lsaved = cross_entropy(out.reshape(-1, out.shape[-1]), y.reshape(-1))
        upstream = lambda g: cross_entropy_backward(lsaved, g).reshape(out.shape)  # noqa: E731

    def backward(g):
        grads = {}
        net.backward(p, saved, upstream(g), grads)
        return grads
    return loss, backward


def gradients(task, net, p, state, x, y, step):
    """The step's loss and gradients; with G groups docs/training.md's tree over them."""
    groups = task.get("gradient_groups", 1)
    if groups == 1:
        loss, backward = step_loss(task, net, p, state, x, y, step, 0)
        return loss, backward(F(1.0))
    scale = F(1.0 / groups)
    per = x.shape[0] // groups
    floats = [k for k in sorted(state) if k.startswith("buffer/") and state[k].dtype == F]
    start = {k: v.copy() for k, v in state.items() if k.startswith("buffer/")}
    names = sorted(p, key=lambda s: s.encode())
    pending = []
    for g in range(groups):
        state.update({k: v.copy() for k, v in start.items()})
        loss, backward = step_loss(task, net, p, state, x[g * per:(g + 1) * per], y[g * per:(g + 1) * per], step, g)
        grads = backward(scale)
        parts = [grads[n].reshape(-1) for n in names] + [state[k].reshape(-1) * scale for k in floats]
        node = (0, np.concatenate(parts + [np.array([loss * scale], F)]))
        while pending and pending[-1][0] == node[0]:
            left = pending.pop()
            node = (node[0] + 1, left[1] + node[1])
        pending.append(node)
    total, offset, grads = pending[0][1], 0, {}
    for n in names:
        grads[n] = total[offset:offset + p[n].size].reshape(p[n].shape)
        offset += p[n].size
    for k in floats:
        state[k] = total[offset:offset + state[k].size].reshape(state[k].shape)
        offset += state[k].size
    return total[offset], grads


def clip_sum(v):
    """docs/portable.md, "Gradient clipping": a sum in chunks of 16384 values, each a lane sum,
    then the lane sum of the chunks' sums."""
    v = v.reshape(-1)
    chunks = [lanes(v[i:i + 16384]) for i in range(0, v.size, 16384)]
    return lanes(np.array(chunks, F)) if chunks else F(0.0)


def abs_max(v):
    v = np.abs(v.reshape(-1))
    if np.isnan(v).any():
        return F(np.nan)
    return F(v.max()) if v.size else F(0.0)


def clip(task, grads):
    """optimizer.clip_grad_norm (docs/portable.md, "Gradient clipping"): each gradient's part in
    canonical (name) order, the coefficient min(max_norm / (norm + 1e-6), 1), every gradient
    multiplied by it."""
    o = task["optimizer"]
    names = sorted(grads, key=lambda s: s.encode())
    inf = o.get("clip_norm", "l2") == "inf"
    parts = np.array([abs_max(grads[n]) if inf else clip_sum(grads[n] * grads[n]) for n in names], F)
    if inf:
        norm = F(np.nan) if np.isnan(parts).any() else F(parts.max())
    else:
        norm = np.sqrt(clip_sum(parts))
    c = F(o["clip_grad_norm"]) / (norm + F(1e-6))
    if not np.isnan(c) and c > F(1.0):
        c = F(1.0)
    if c != F(1.0):
        for n in names:
            grads[n] = (grads[n] * c).astype(F)


def update(task, p, slots, grads, lr):
    o = task["optimizer"]
    spared = set(o.get("no_decay", []))
    for name in sorted(p):
        slot = slots[name]
        slot["step"] += 1
        t, g, w = slot["step"], grads[name], p[name]
        decay = 0.0 if name in spared else o["weight_decay"]
        if o["name"] == "sgd":
            d = g
            if decay != 0.0:
                d = d + F(decay) * w
            if o["momentum"] != 0.0:
                mu = F(o["momentum"])
                slot["momentum_buffer"] = d.copy() if t == 1 else slot["momentum_buffer"] * mu + d
                d = d + mu * slot["momentum_buffer"] if o["nesterov"] else slot["momentum_buffer"]
            p[name] = w - F(lr) * d
            continue
        wd = F(decay)
        if o["name"] == "adamw":
            w = w * (F(1.0) - F(lr) * wd)
        elif decay != 0.0:
            g = g + wd * w
        b1, b2 = F(o["beta1"]), F(o["beta2"])
        slot["exp_avg"] = slot["exp_avg"] + (F(1.0) - b1) * (g - slot["exp_avg"])
        slot["exp_avg_sq"] = slot["exp_avg_sq"] * b2 + (F(1.0) - b2) * (g * g)
        c1 = F(lr / (1.0 - power(o["beta1"], t)))
        b2s = F(math.sqrt(1.0 - power(o["beta2"], t)))
        den = np.sqrt(slot["exp_avg_sq"]) / b2s + F(o["eps"])
        p[name] = w - c1 * (slot["exp_avg"] / den)


def average(task, p, state, ema):
    """optimizer.ema_decay (docs/training.md, "Recipes"): a = a*d + x*(1 - d) for every averaged
    parameter and buffer, each scalar rounded once to binary32."""
    d = task["optimizer"]["ema_decay"]
    decay, rest = F(d), F(1.0 - d)
    for name in ema:
        live = p[name] if name in p else state["buffer/" + name]
        ema[name] = (ema[name] * decay + live * rest).astype(F)


def augmented(task, x, epoch, first):
    """docs/datasets.md, "Augmentation": row i is the example at position first + i; each pixel
    is copied from the padded image or is +0.0."""
    aug = task["dataset"].get("augment", {})
    if not aug.get("crop_padding", 0) and not aug.get("flip", False):
        return x
    pad = aug.get("crop_padding", 0)
    mode = "reflect" if aug.get("padding_mode", "zero") == "reflect" else "constant"
    out = np.empty_like(x)
    h, w = x.shape[2], x.shape[3]
    for i in range(x.shape[0]):
        top, left, flip = augment_draw(aug, task.get("seed", 0), epoch, first + i)
        padded = np.pad(x[i], [(0, 0), (pad, pad), (pad, pad)], mode=mode)
        crop = padded[:, top:top + h, left:left + w]
        out[i] = crop[:, :, ::-1] if flip else crop
    return out


def replay(task, meta, state):
    net = MODELS[task["model"]["name"]](task["model"]["options"])
    x_all, y_all = dataset(task)
    p = {k[len("param/"):]: v for k, v in state.items() if k.startswith("param/")}
    slots = {}
    for name in p:
        prefix = "optim/%s/" % name
        slots[name] = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
        slots[name]["step"] = int(slots[name]["step"])
    ema = {k[len("ema/"):]: v for k, v in state.items() if k.startswith("ema/")}
    epoch, step = int(meta["epoch"]) + 1, int(meta["global_step"])
    batch = task["batch_size"]
    steps = task.get("steps_per_epoch", 0) or max(1, x_all.shape[0] // batch)
    order = np.array(epoch_order(task.get("seed", 0), epoch, x_all.shape[0], steps * batch), dtype=np.int64)
    for s in range(steps):
        idx = order[s * batch:(s + 1) * batch]
        lr = learning_rate(task, step, epoch, steps * task["epochs"])
        x = augmented(task, x_all[idx], epoch, s * batch)
        _, grads = gradients(task, net, p, state, x, y_all[idx], step)
        if task["optimizer"].get("clip_grad_norm", 0.0) > 0.0:
            clip(task, grads)
        update(task, p, slots, grads, lr)
        if task["optimizer"].get("ema_decay", 0.0) > 0.0:
            average(task, p, state, ema)
        step += 1
    out = {k: v for k, v in state.items() if k.startswith(("buffer/", "rng/"))}
    for name, a in ema.items():
        out["ema/" + name] = a
    for name, w in p.items():
        out["param/" + name] = w
        for k, v in slots[name].items():
            out["optim/%s/%s" % (name, k)] = np.array(v, dtype=np.int64) if k == "step" else v
    return out, dict(meta, epoch=str(epoch), global_step=str(step), data_cursor=str(epoch))


def initial_state(task, template):
    """Epoch 0: the template's names and shapes (its values are not read, but rng/cpu's)."""
    shapes = {k[len("param/"):]: tuple(v.shape) for k, v in template.items() if k.startswith("param/")}
    out = {k: v for k, v in template.items() if k.startswith("rng/")}
    for k, v in template.items():
        if k.startswith("buffer/"):
            name = k.rsplit(".", 1)[-1]
            out[k] = (np.ones_like(v) if name == "running_var" else np.zeros_like(v))
        elif k.startswith("optim/"):
            out[k] = np.zeros_like(v)
    for name, w in initial_params(task, shapes).items():
        out["param/" + name] = w
    # The moving average starts at the initial weights and buffers.
    for k in template:
        if k.startswith("ema/"):
            name = k[len("ema/"):]
            out[k] = out["param/" + name] if "param/" + name in out else out["buffer/" + name]
    return out


def run(job):
    init = job[0] == "--init"
    task_path, before, after = job[1:] if init else job
    task = load_task(task_path)
    meta, state = read_safetensors(before)
    if init:
        out = initial_state(task, state)
    else:
        out, meta = replay(task, meta, state)
    write_safetensors(after, out, meta)


def main(args):
    for job in split_jobs(args, __doc__):
        try:
            run(job)
        except NotCovered as e:
            print("portable_ref: not covered: %s" % e, file=sys.stderr)
            return NOT_COVERED
        except (OSError, KeyError, ValueError) as e:
            print("portable_ref: %s" % e, file=sys.stderr)
            return BAD_INPUT
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
