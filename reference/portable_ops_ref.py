#!/usr/bin/env python3
"""The operators of docs/portable.md, "More functions" and "Operators of real models", in numpy
float32 alone (no torch), written from that page: tests/kernels/ops_ref_test.py checks
veritrain's kernels against these functions bit for bit, so that agreement means the page is
complete.

Every ⊕ ⊖ ⊗ ⊘ of the page is one numpy float32 operation (correctly rounded, never fused);
numpy vectorises over *independent* outputs only, and every chain ("A chain") is a loop over
its index in the documented order. Product chains, exp, log and the dropout stream are
reference/portable_ref.py's (`mm`, `vt_exp`, `vt_log`, `uniforms_at`), not written again here.

Forward and backward functions return dicts of float32 arrays named as the probe's outputs
(tests/kernels/ops_ref_test.py); inputs are float32 arrays (targets int64), float parameters
binary32 values.
"""
import math
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from portable_ref import (F, chain, draws_at, linear, linear_backward, mm, uniforms_at, vt_exp,  # noqa: E402
                          vt_log)

np.seterr(all="ignore")  # inf and NaN are values here, as in IEEE
ONE, ZERO = F(1.0), F(0.0)


class Undefined(ValueError):
    """Parameters for which docs/portable.md defines no result (e.g. a max-pooling window that
    holds no input position: it has no "first position")."""


def f32(x):
    return np.asarray(x, dtype=F)


def pick(cond, a, b):
    """cond ? a : b, element-wise, without arithmetic (a selection rounds nothing)."""
    return np.where(cond, a, b).astype(F)


# ============================================================================================
# More functions (element-wise)
# ============================================================================================
TANH_POLY = (2.06390887954e-2, -5.37397155531e-2, 1.33314422036e-1, -3.33332819422e-1)


def sigmoid(x):
    """**sigmoid**: `σ(x) = 1 ⊘ (1 ⊕ exp(⊖x))`."""
    x = f32(x)
    return (ONE / (ONE + vt_exp(-x))).astype(F)


def sigmoid_backward(s, dy):
    """**sigmoid** backward from the output s: `dx = dy ⊗ (s ⊗ (1 ⊖ s))`."""
    return (dy * (s * (ONE - s))).astype(F)


def tanh(x):
    """**tanh**: NaN → NaN. `a = |x|`; if `a < 0.625`: `z = a ⊗ a`, `p = −5.70498872745e−3`, then
    `p = p ⊗ z ⊕ c` for the four c; `y = (p ⊗ z) ⊗ a ⊕ a`. Else `y = 1 ⊖ 2 ⊘ (exp(a ⊕ a) ⊕ 1)`.
    The result is y, negated when x's sign bit is set."""
    x = f32(x)
    a = np.abs(x)
    z = a * a
    p = np.full_like(a, F(-5.70498872745e-3))
    for c in TANH_POLY:
        p = p * z + F(c)
    small = (p * z) * a + a
    large = ONE - F(2.0) / (vt_exp(a + a) + ONE)
    y = pick(a < F(0.625), small, large)
    y = pick(np.signbit(x), -y, y)
    return pick(np.isnan(x), x, y)


def tanh_backward(t, dy):
    """**tanh** backward from the output t: `dx = dy ⊗ (1 ⊖ t ⊗ t)`."""
    return (dy * (ONE - t * t)).astype(F)


def silu(x, dy):
    """**silu**: `y = x ⊗ σ(x)`; `dx = dy ⊗ (s ⊗ (1 ⊕ x ⊗ (1 ⊖ s)))` with `s = σ(x)`."""
    s = sigmoid(x)
    return {"y": x * s, "dx": dy * (s * (ONE + x * (ONE - s)))}


def hardtanh(x, dy, min_val, max_val):
    """**hardtanh**: `y = x < min ? min : (x > max ? max : x)` (NaN passes);
    `dx = (x ≤ min or x ≥ max) ? +0 : dy`."""
    lo, hi = F(min_val), F(max_val)
    y = pick(x < lo, lo, pick(x > hi, hi, x))
    return {"y": y, "dx": pick((x <= lo) | (x >= hi), ZERO, dy)}


def hardsigmoid(x, dy):
    """**hardsigmoid**: `y = x ≤ −3 ? +0 : (x ≥ 3 ? 1 : x ⊘ 6 ⊕ 0.5)`;
    `dx = (−3 < x < 3) ? dy ⊘ 6 : +0`."""
    three, six = F(3.0), F(6.0)
    y = pick(x <= -three, ZERO, pick(x >= three, ONE, x / six + F(0.5)))
    return {"y": y, "dx": pick((-three < x) & (x < three), dy / six, ZERO)}


def hardswish(x, dy):
    """**hardswish**: `y = x ≤ −3 ? +0 : (x ≥ 3 ? x : (x ⊗ (x ⊕ 3)) ⊘ 6)`;
    `dx = x < −3 ? +0 : (x ≤ 3 ? dy ⊗ (x ⊘ 3 ⊕ 0.5) : dy)`."""
    three, six = F(3.0), F(6.0)
    y = pick(x <= -three, ZERO, pick(x >= three, x, (x * (x + three)) / six))
    dx = pick(x < -three, ZERO, pick(x <= three, dy * (x / three + F(0.5)), dy))
    return {"y": y, "dx": dx}


def leaky_relu(x, dy, slope):
    """**leaky_relu**: `y = x > 0 ? x : x ⊗ slope`; `dx = x > 0 ? dy : dy ⊗ slope`."""
    s = F(slope)
    return {"y": pick(x > ZERO, x, x * s), "dx": pick(x > ZERO, dy, dy * s)}


def elu(x, dy, alpha):
    """**elu**: `y = x > 0 ? x : alpha ⊗ (exp(x) ⊖ 1)`; `dx = x > 0 ? dy : dy ⊗ (alpha ⊗ exp(x))`."""
    a, e = F(alpha), vt_exp(x)
    return {"y": pick(x > ZERO, x, a * (e - ONE)), "dx": pick(x > ZERO, dy, dy * (a * e))}


SELU_ALPHA, SELU_SCALE = F(1.6732632423543772848170429916717), F(1.0507009873554804934193349852946)


def selu(x, dy):
    """**selu**: `y = x > 0 ? λ ⊗ x : λ ⊗ (α ⊗ (exp(x) ⊖ 1))`;
    `dx = x > 0 ? dy ⊗ λ : dy ⊗ (λ ⊗ (α ⊗ exp(x)))`, α = 1.67326324, λ = 1.05070098."""
    e = vt_exp(x)
    return {"y": pick(x > ZERO, SELU_SCALE * x, SELU_SCALE * (SELU_ALPHA * (e - ONE))),
            "dx": pick(x > ZERO, dy * SELU_SCALE, dy * (SELU_SCALE * (SELU_ALPHA * e)))}


def celu(x, dy, alpha):
    """**celu**: `y = x > 0 ? x : alpha ⊗ (exp(x ⊘ alpha) ⊖ 1)`;
    `dx = x > 0 ? dy : dy ⊗ exp(x ⊘ alpha)`."""
    a = F(alpha)
    e = vt_exp(x / a)
    return {"y": pick(x > ZERO, x, a * (e - ONE)), "dx": pick(x > ZERO, dy, dy * e)}


def mish(x, dy):
    """**mish**: `sp = x > 20 ? x : log(1 ⊕ exp(x))`, `t = tanh(sp)`, `y = x ⊗ t`;
    `dx = dy ⊗ (t ⊕ x ⊗ ((1 ⊖ t ⊗ t) ⊗ σ(x)))`."""
    sp = pick(x > F(20.0), x, vt_log(ONE + vt_exp(x)))
    t = tanh(sp)
    return {"y": x * t, "dx": dy * (t + x * ((ONE - t * t) * sigmoid(x)))}


def log_sigmoid(x, dy):
    """**log_sigmoid**: `y = (x < 0 ? x : 0) ⊖ log(1 ⊕ exp(⊖|x|))`; `dx = dy ⊗ σ(⊖x)`."""
    y = pick(x < ZERO, x, ZERO) - vt_log(ONE + vt_exp(-np.abs(x)))
    return {"y": y, "dx": dy * sigmoid(-x)}


def hardshrink(x, dy, lambd):
    """**hardshrink** (lambd): `y = (⊖lambd ≤ x ≤ lambd) ? +0 : x`;
    `dx = (⊖lambd ≤ x ≤ lambd) ? +0 : dy`."""
    inside = (x >= -F(lambd)) & (x <= F(lambd))
    return {"y": pick(inside, ZERO, x), "dx": pick(inside, ZERO, dy)}


def softshrink(x, dy, lambd):
    """**softshrink** (lambd): `y = x > lambd ? x ⊖ lambd : (x < ⊖lambd ? x ⊕ lambd : x ⊗ 0)`;
    `dx = (⊖lambd ≤ x ≤ lambd) ? +0 : dy`."""
    a = F(lambd)
    y = pick(x > a, x - a, pick(x < -a, x + a, x * ZERO))
    return {"y": y, "dx": pick((x >= -a) & (x <= a), ZERO, dy)}


def threshold(x, dy, th, value):
    """**threshold** (threshold, value): `y = x ≤ threshold ? value : x`;
    `dx = x ≤ threshold ? +0 : dy`."""
    below = x <= F(th)
    return {"y": pick(below, np.full_like(x, F(value)), x), "dx": pick(below, ZERO, dy)}


GELU_K, GELU_A, GELU_B = F(0.797884583), F(0.044715), F(0.134145)


def gelu_tanh(x, dy):
    """**GELU, tanh form**: `u = 0.797884583 ⊗ (x ⊕ 0.044715 ⊗ (x ⊗ (x ⊗ x)))`, `t = tanh(u)`,
    `y = (0.5 ⊗ x) ⊗ (1 ⊕ t)`; backward `dx = dy ⊗ (0.5 ⊗ (1 ⊕ t) ⊕ ((0.5 ⊗ x) ⊗ (1 ⊖ t ⊗ t)) ⊗
    (0.797884583 ⊗ (1 ⊕ 0.134145 ⊗ (x ⊗ x))))`."""
    half = F(0.5)
    u = GELU_K * (x + GELU_A * (x * (x * x)))
    t = tanh(u)
    y = (half * x) * (ONE + t)
    inner = GELU_K * (ONE + GELU_B * (x * x))
    dx = dy * (half * (ONE + t) + ((half * x) * (ONE - t * t)) * inner)
    return {"y": y, "dx": dx}


def softplus(x, dy, beta, threshold):
    """**softplus**: `z = x ⊗ beta`; `y = z > threshold ? x : log(1 ⊕ exp(z)) ⊘ beta`;
    `dx = z > threshold ? dy : dy ⊗ (exp(z) ⊘ (exp(z) ⊕ 1))`."""
    b, th = F(beta), F(threshold)
    z = x * b
    e = vt_exp(z)
    linear_part = z > th
    y = pick(linear_part, x, vt_log(ONE + e) / b)
    return {"y": y, "dx": pick(linear_part, dy, dy * (e / (e + ONE)))}


def exp_backward(y, dy):
    """**exp**: `y = exp(x)` of "Functions"; backward from the output, `dx = dy ⊗ y`."""
    return f32(f32(dy) * f32(y))


def activation(fn, x, dy, **params):
    """The probe's `act`: y and dx of one function of "More functions"."""
    x, dy = f32(x), f32(dy)
    if fn == "sigmoid":
        y = sigmoid(x)
        return {"y": y, "dx": sigmoid_backward(y, dy)}
    if fn == "tanh":
        y = tanh(x)
        return {"y": y, "dx": tanh_backward(y, dy)}
    if fn == "exp":
        y = vt_exp(x)
        return {"y": y, "dx": exp_backward(y, dy)}
    if fn == "log":  # **log**: `y = log(x)` of "Functions"; `dx = dy ⊘ x`
        return {"y": vt_log(x), "dx": f32(dy / x)}
    if fn == "silu":
        out = silu(x, dy)
    elif fn == "hardtanh":
        out = hardtanh(x, dy, params["min_val"], params["max_val"])
    elif fn == "hardsigmoid":
        out = hardsigmoid(x, dy)
    elif fn == "hardswish":
        out = hardswish(x, dy)
    elif fn == "leaky_relu":
        out = leaky_relu(x, dy, params["slope"])
    elif fn == "elu":
        out = elu(x, dy, params["alpha"])
    elif fn == "gelu_tanh":
        out = gelu_tanh(x, dy)
    elif fn == "softplus":
        out = softplus(x, dy, params["beta"], params["threshold"])
    elif fn == "selu":
        out = selu(x, dy)
    elif fn == "celu":
        out = celu(x, dy, params["alpha"])
    elif fn == "mish":
        out = mish(x, dy)
    elif fn == "log_sigmoid":
        out = log_sigmoid(x, dy)
    elif fn == "hardshrink":
        out = hardshrink(x, dy, params["alpha"])
    elif fn == "softshrink":
        out = softshrink(x, dy, params["alpha"])
    elif fn == "threshold":
        out = threshold(x, dy, params["threshold"], params["alpha"])
    else:
        raise ValueError("unknown activation %r" % fn)
    return {k: f32(v) for k, v in out.items()}


# ============================================================================================
# Pooling
# ============================================================================================
def pool_out_size(size, k, s, p, d=1, ceil_mode=False):
    """"Output sizes are LibTorch's: `O = ⌊(H + 2p − d·(k − 1) − 1) / s⌋ + 1` (with `ceil_mode` the
    ceiling, less one when `(O − 1)·s ≥ H + p`)"."""
    num = size + 2 * p - d * (k - 1) - 1
    if not ceil_mode:
        return num // s + 1
    o = -(-num // s) + 1
    if (o - 1) * s >= size + p:
        o -= 1
    return o


def max_rule(values):
    """max_pool2d's rule over a sequence of equal-shaped arrays (one window per element):
    `m` is the first value; each later value v replaces it when `v > m` or v is NaN.
    Returns m and the index (in the sequence) of the value it holds."""
    m, arg = None, None
    for n, v in enumerate(values):
        if m is None:
            m, arg = f32(v).copy(), np.zeros(np.shape(v), np.int64)
            continue
        take = (v > m) | np.isnan(v)
        m, arg = pick(take, v, m), np.where(take, n, arg)
    return m, arg


def _max_windows(x, rows, cols):
    """max_pool2d's rule over windows given as per-output position lists: rows[i] (cols[j]) the
    window's row (column) positions, in order, for output row i (column j); positions outside the
    input are skipped. Returns y [B, C, OH, OW] and each output's argmax as a flat h·W + w."""
    b, c, h, w = x.shape
    oh, ow = len(rows), len(cols)
    y = np.zeros((b, c, oh, ow), F)
    arg = np.zeros((b, c, oh, ow), np.int64)
    for i in range(oh):
        for j in range(ow):
            positions = [(r, q) for r in rows[i] if 0 <= r < h for q in cols[j] if 0 <= q < w]
            if not positions:  # "+0.0 and passes no gradient"
                y[:, :, i, j], arg[:, :, i, j] = F(0.0), -1
                continue
            m, n = max_rule([x[:, :, r, q] for r, q in positions])
            flat = np.array([r * w + q for r, q in positions], np.int64)
            y[:, :, i, j], arg[:, :, i, j] = m, flat[n]
    return y, arg


def _max_backward(shape, arg, dy):
    """"dx starts at +0.0; for each output in (i, j) order, `dx[its argmax] = dx[its argmax] ⊕ dy`"."""
    b, c, h, w = shape
    dx = np.zeros((b * c, h * w), F)
    planes = np.arange(b * c)
    a2, g2 = arg.reshape(b * c, -1), dy.reshape(b * c, -1)
    for o in range(a2.shape[1]):  # one argmax per plane: no two planes collide
        live = a2[:, o] >= 0  # a window with no input position passes no gradient
        dx[planes[live], a2[live, o]] = dx[planes[live], a2[live, o]] + g2[live, o]
    return dx.reshape(shape)


def max_pool2d(x, dy, kernel, stride, padding, dilation, ceil_mode):
    """*max_pool2d*: window `(i·s − p + a·d, j·s − p + e·d)` for a, e in 0…k−1, row by row, positions
    in the padding skipped; the max rule; backward into the argmax, outputs in (i, j) order."""
    x, dy = f32(x), f32(dy)
    h, w = x.shape[2:]
    oh = pool_out_size(h, kernel[0], stride[0], padding[0], dilation[0], ceil_mode)
    ow = pool_out_size(w, kernel[1], stride[1], padding[1], dilation[1], ceil_mode)
    rows = [[i * stride[0] - padding[0] + a * dilation[0] for a in range(kernel[0])] for i in range(oh)]
    cols = [[j * stride[1] - padding[1] + e * dilation[1] for e in range(kernel[1])] for j in range(ow)]
    y, arg = _max_windows(x, rows, cols)
    return {"y": y, "dx": _max_backward(x.shape, arg, dy.reshape(y.shape))}


def _avg_windows(x, dy, windows):
    """S = chain over each window's in-input positions (row by row), y = S ⊘ float(divisor);
    backward g = dy ⊘ float(divisor), every in-input position of every window, outputs in order,
    gets ⊕ g. `windows[i][j]` = (row range, column range, divisor)."""
    b, c, h, w = x.shape
    oh, ow = len(windows), len(windows[0])
    y = np.zeros((b, c, oh, ow), F)
    dx = np.zeros(x.shape, F)
    for i in range(oh):
        for j in range(ow):
            (r0, r1), (c0, c1), divisor = windows[i][j]
            s = np.zeros((b, c), F)
            for r in range(r0, r1):
                for q in range(c0, c1):
                    s = s + x[:, :, r, q]
            y[:, :, i, j] = s / F(divisor)
            g = dy[:, :, i, j] / F(divisor)
            for r in range(r0, r1):
                for q in range(c0, c1):
                    dx[:, :, r, q] = dx[:, :, r, q] + g
    return {"y": y, "dx": dx}


def avg_pool2d(x, dy, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override):
    """*avg_pool2d*: the window is rows `[i·s − p, min(i·s − p + k, H + p))` (likewise columns);
    `S` = chain over its in-input positions; the divisor is `divisor_override` when given, else
    the window's size counted with its padding (count_include_pad) or without it."""
    x, dy = f32(x), f32(dy)
    h, w = x.shape[2:]
    oh = pool_out_size(h, kernel[0], stride[0], padding[0], 1, ceil_mode)
    ow = pool_out_size(w, kernel[1], stride[1], padding[1], 1, ceil_mode)

    def span(i, d, size):
        start = i * stride[d] - padding[d]
        end = min(start + kernel[d], size + padding[d])
        return start, end, max(start, 0), min(end, size)

    windows = []
    for i in range(oh):
        row = []
        hs, he, r0, r1 = span(i, 0, h)
        for j in range(ow):
            ws, we, c0, c1 = span(j, 1, w)
            if divisor_override:
                divisor = divisor_override
            elif count_include_pad:
                divisor = (he - hs) * (we - ws)
            else:
                divisor = (r1 - r0) * (c1 - c0)
            row.append(((r0, r1), (c0, c1), divisor))
        windows.append(row)
    return _avg_windows(x, dy.reshape(x.shape[:2] + (oh, ow)), windows)


def adaptive_span(i, size, out):
    """Output i covers `[⌊i·H / OH⌋, ⌈(i + 1)·H / OH⌉)`."""
    return (i * size) // out, -(-((i + 1) * size) // out)


def adaptive_avg_pool2d(x, dy, output):
    """*adaptive_avg_pool2d* (OH, OW): `y = S ⊘ float(count)`; backward as avg_pool2d's with
    `g = dy ⊘ float(count)`."""
    x, dy = f32(x), f32(dy)
    h, w = x.shape[2:]
    oh, ow = output
    windows = []
    for i in range(oh):
        (r0, r1), row = adaptive_span(i, h, oh), []
        for j in range(ow):
            c0, c1 = adaptive_span(j, w, ow)
            row.append(((r0, r1), (c0, c1), (r1 - r0) * (c1 - c0)))
        windows.append(row)
    return _avg_windows(x, dy.reshape(x.shape[:2] + (oh, ow)), windows)


def upsample_scale(size, out, align_corners, scale_factor):
    """*upsample_bilinear2d*'s ratio: with align_corners `float(H − 1) ⊘ float(OH − 1)` (+0 for
    OH = 1); else `binary32(1 / scale_factor)` when one was given (> 0), or `float(H) ⊘ float(OH)`."""
    if align_corners:
        return F(size - 1) / F(out - 1) if out > 1 else F(0.0)
    if scale_factor > 0:
        return F(1.0 / scale_factor)
    return F(size) / F(out)


def bilinear_taps(out, size, scale, align_corners):
    """Output i's source `src = scale ⊗ float(i)` (align_corners) or `(scale ⊗ (float(i) ⊕ 0.5)) ⊖
    0.5`, +0 where that is below 0 or NaN; rows `h0 = min(⌊src⌋, H − 1)`, `h1 = h0 + 1` (`h0` at
    the last row); weights `λ1 = src ⊖ float(h0)`, `λ0 = 1 ⊖ λ1`."""
    taps = []
    for i in range(out):
        src = F(scale) * F(i) if align_corners else F(F(scale) * (F(i) + F(0.5))) - F(0.5)
        if not src > 0:
            src = F(0.0)
        first = size - 1 if src >= F(size - 1) else int(src)
        second = first + 1 if first < size - 1 else first
        far = F(src - F(first))
        taps.append((first, second, F(F(1.0) - far), far))
    return taps


def upsample_bilinear2d(x, dy, align_corners, scale_factor):
    """*upsample_bilinear2d* (OH × OW from dy): `y = λh0 ⊗ (λw0 ⊗ x[h0, w0] ⊕ λw1 ⊗ x[h0, w1]) ⊕
    λh1 ⊗ (λw0 ⊗ x[h1, w0] ⊕ λw1 ⊗ x[h1, w1])`. Backward: dx = +0, then for each output in storage
    order `dx[h0, w0] ⊕= (λh0 ⊗ λw0) ⊗ dy`, then `[h0, w1]`, `[h1, w0]`, `[h1, w1]` likewise."""
    x, dy = f32(x), f32(dy)
    (h, w), (oh, ow) = x.shape[2:], dy.shape[2:]
    return upsample_bilinear2d_at(x, dy, align_corners,
                                  upsample_scale(h, oh, align_corners, scale_factor[0]),
                                  upsample_scale(w, ow, align_corners, scale_factor[1]))


def upsample_bilinear2d_at(x, dy, align_corners, scale_h, scale_w):
    """upsample_bilinear2d at the given binary32 ratios (what a trace records)."""
    h, w = x.shape[2:]
    oh, ow = dy.shape[2:]
    rows = bilinear_taps(oh, h, scale_h, align_corners)
    cols = bilinear_taps(ow, w, scale_w, align_corners)
    y = np.zeros(dy.shape, F)
    dx = np.zeros(x.shape, F)
    for i, (h0, h1, rn, rf) in enumerate(rows):
        for j, (w0, w1, cn, cf) in enumerate(cols):
            upper = cn * x[:, :, h0, w0] + cf * x[:, :, h0, w1]
            lower = cn * x[:, :, h1, w0] + cf * x[:, :, h1, w1]
            y[:, :, i, j] = rn * upper + rf * lower
            g = dy[:, :, i, j]
            dx[:, :, h0, w0] = dx[:, :, h0, w0] + F(rn * cn) * g
            dx[:, :, h0, w1] = dx[:, :, h0, w1] + F(rn * cf) * g
            dx[:, :, h1, w0] = dx[:, :, h1, w0] + F(rf * cn) * g
            dx[:, :, h1, w1] = dx[:, :, h1, w1] + F(rf * cf) * g
    return {"y": y, "dx": dx}


def nearest_sources(out, size, scale):
    """Output i copies input `min(⌊float(i) ⊗ r⌋, H − 1)` (0 where that is below 0 or NaN)."""
    at = []
    for i in range(out):
        src = np.floor(F(i) * F(scale))
        at.append(0 if not src > 0 else (size - 1 if src >= F(size - 1) else int(src)))
    return at


def upsample_nearest(x, dy, scale_factor):
    """*upsample_nearest* ([B, C] and 1 to 3 sizes; the output's from dy), each dimension's r as
    upsample_bilinear2d's without align_corners: a copy; backward: dx = +0, then for each output
    in storage order `dx[src] ⊕= dy`."""
    x, dy = f32(x), f32(dy)
    scales = [upsample_scale(n, o, False, f) for n, o, f in zip(x.shape[2:], dy.shape[2:], scale_factor)]
    return upsample_nearest_at(x, dy, scales)


def upsample_nearest_at(x, dy, scales):
    """upsample_nearest at the given binary32 ratios, one per spatial dimension."""
    spatial = x.ndim - 2
    reads = [nearest_sources(o, n, r) for o, n, r in zip(dy.shape[2:], x.shape[2:], scales)]
    y = x[(slice(None), slice(None)) + np.ix_(*reads)].astype(F)
    dx = np.zeros(x.shape, F)
    for out_at in np.ndindex(*dy.shape[2:]):
        src = tuple(reads[d][out_at[d]] for d in range(spatial))
        index = (slice(None), slice(None))
        dx[index + src] = dx[index + src] + dy[index + out_at]
    return {"y": y, "dx": dx}


def adaptive_max_pool2d(x, dy, output):
    """*adaptive_max_pool2d* (OH, OW): the adaptive windows, max_pool2d's rule."""
    x, dy = f32(x), f32(dy)
    h, w = x.shape[2:]
    oh, ow = output
    rows = [list(range(*adaptive_span(i, h, oh))) for i in range(oh)]
    cols = [list(range(*adaptive_span(j, w, ow))) for j in range(ow)]
    y, arg = _max_windows(x, rows, cols)
    return {"y": y, "dx": _max_backward(x.shape, arg, dy.reshape(y.shape))}


# ============================================================================================
# Convolution (3-d; 2-d is depth 1), groups and dilation, transposed
# ============================================================================================
def conv_out_size(size, k, s, p, d):
    return (size + 2 * p - d * (k - 1) - 1) // s + 1


def columns(x, k, stride, pad, dil, out):
    """"The column matrix of example b has rows q = (c, t, u, v) and columns p = (z, i, j), entry
    `x[b, c, z·sD + t·dD − pD, i·sH + u·dH − pH, j·sW + v·dW − pW]` or +0.0 in the padding",
    for every example at once: [B, C·kD·kH·kW, OD·OH·OW]."""
    xp = np.pad(x, [(0, 0), (0, 0)] + [(p, p) for p in pad])  # the padding is +0.0
    rows = []
    for c in range(x.shape[1]):
        for tap in np.ndindex(*k):
            sl = tuple(slice(tap[n] * dil[n], tap[n] * dil[n] + stride[n] * (out[n] - 1) + 1, stride[n])
                       for n in range(3))
            rows.append(xp[(slice(None), c) + sl].reshape(x.shape[0], -1))
    return np.stack(rows, axis=1).astype(F)


def scatter_columns(dcol, channels, k, stride, pad, dil, out, size):
    """The column scatter of "Operators": dcol [B, channels·taps, positions] into [B, channels,
    *size]: it starts at +0.0; for (t, u, v) in order, each position read by column p through
    that tap gets ⊕ dcol[(c, t, u, v), p] (padding positions dropped)."""
    b = dcol.shape[0]
    taps = int(np.prod(k))
    d5 = dcol.reshape((b, channels, taps) + tuple(out))
    padded = np.zeros((b, channels) + tuple(s + 2 * p for s, p in zip(size, pad)), F)
    for t, tap in enumerate(np.ndindex(*k)):
        sl = tuple(slice(tap[n] * dil[n], tap[n] * dil[n] + stride[n] * (out[n] - 1) + 1, stride[n])
                   for n in range(3))
        target = (slice(None), slice(None)) + sl
        padded[target] = padded[target] + d5[:, :, t]
    inner = tuple(slice(p, p + s) for p, s in zip(pad, size))
    return padded[(slice(None), slice(None)) + inner]


def conv_forward(x, w, bias, stride, pad, dil, groups):
    """**Convolution** with groups: group g is the convolution of "Operators" from its C/G input
    to its O/G output channels with its own weights; `y[b, o, p]` = (product chain over q of
    `w[o, q] ⊗ col[q, p]`) ⊕ `bias[o]` (no bias: just the chain)."""
    x, w = f32(x), f32(w)
    b, c = x.shape[:2]
    o, k = w.shape[0], w.shape[2:]
    out = [conv_out_size(x.shape[2 + n], k[n], stride[n], pad[n], dil[n]) for n in range(3)]
    cg, og = c // groups, o // groups
    ys = []
    for g in range(groups):
        col = columns(x[:, g * cg:(g + 1) * cg], k, stride, pad, dil, out)
        wg = w[g * og:(g + 1) * og].reshape(og, -1)
        ys.append(mm(wg[None], col))
    y = np.concatenate(ys, axis=1)
    if bias is not None:
        y = y + f32(bias)[None, :, None]
    return y.reshape((b, o) + tuple(out)).astype(F)


def conv_backward(x, w, dy, stride, pad, dil, groups, has_bias):
    """Convolution backward: `dw[o, q]` = product chain over b, then over p, of
    `dy[b, o, p] ⊗ col_b[q, p]`; `dbias[o]` = chain over b, then p, of `dy[b, o, p]`; dx: for
    stride 1, padding ≤ kernel − 1 in every dimension and dilation 1 the convolution of dy by
    the transposed, flipped weights with padding k − 1 − p (one product chain over (o, t, u, v));
    any other (dilation ≠ 1 included) the dcol form: `dcol[q, p]` = product chain over o of
    `w[o, q] ⊗ dy[b, o, p]`, scattered."""
    x, w, dy = f32(x), f32(w), f32(dy)
    b, c = x.shape[:2]
    o, k = w.shape[0], tuple(w.shape[2:])
    out = list(dy.shape[2:])
    cg, og = c // groups, o // groups
    dy3 = dy.reshape(b, o, -1)
    flipped_form = (all(s == 1 for s in stride) and all(p <= kk - 1 for p, kk in zip(pad, k))
                    and all(d == 1 for d in dil))
    dws, dxs = [], []
    for g in range(groups):
        xg, wg, dyg = x[:, g * cg:(g + 1) * cg], w[g * og:(g + 1) * og], dy3[:, g * og:(g + 1) * og]
        col = columns(xg, k, stride, pad, dil, out)
        dw = None
        for n in range(b):  # dw's chain continues from example to example
            dw = mm(dyg[n], col[n].T, dw)
        dws.append(dw.reshape(wg.shape))
        if flipped_form:
            wflip = np.ascontiguousarray(np.flip(wg.transpose(1, 0, 2, 3, 4), axis=(2, 3, 4)))
            dyg5 = dyg.reshape((b, og) + tuple(out))
            dxs.append(conv_forward(dyg5, wflip, None, (1, 1, 1), [kk - 1 - p for kk, p in zip(k, pad)],
                                    (1, 1, 1), 1))
        else:
            dcol = mm(wg.reshape(og, -1).T[None], dyg)
            dxs.append(scatter_columns(dcol, cg, k, stride, pad, dil, out, x.shape[2:]))
    res = {"dx": np.concatenate(dxs, axis=1).astype(F), "dw": np.concatenate(dws, axis=0).astype(F)}
    if has_bias:
        res["dbias"] = chain(dy3.transpose(1, 0, 2).reshape(o, -1), 1)
    return res


def conv(x, w, bias, dy, stride, padding, dilation, groups):
    """The probe's `conv`: y, dx, dw (and dbias with a bias)."""
    y = conv_forward(x, w, bias, stride, padding, dilation, groups)
    res = {"y": y}
    res.update(conv_backward(x, w, f32(dy).reshape(y.shape), stride, padding, dilation, groups,
                             bias is not None))
    return res


def conv_transpose_forward(x, w, bias, stride, pad, output_padding, dil, groups):
    """*transposed convolution* (weight [C, O/G, k…]): "exactly the dx of the convolution whose
    weight it is (C output and O input channels, the same stride, padding, dilation and groups),
    with its own input as that convolution's dy: the flipped-weight convolution for stride 1,
    padding ≤ k − 1 and dilation 1, else the dcol form with its column scatter". Its output's
    size is `(H − 1)·s − 2p + d·(k − 1) + output_padding + 1`; then `⊕ bias[o]`."""
    x, w = f32(x), f32(w)
    b = x.shape[0]
    k = w.shape[2:]
    size = [(x.shape[2 + n] - 1) * stride[n] - 2 * pad[n] + dil[n] * (k[n] - 1) + output_padding[n] + 1
            for n in range(3)]
    # The convolution's input has the transposed output's shape; only its dx is read.
    conv_input = np.zeros([b, w.shape[1] * groups] + size, F)
    y = conv_backward(conv_input, w, x, stride, pad, dil, groups, False)["dx"]
    if bias is not None:
        y = y + f32(bias)[None, :, None, None, None]
    return y.astype(F)


def conv_transpose_backward(x, w, dy, stride, pad, dil, groups, has_bias):
    """Its backward: "dx is the forward convolution of dy with w (no bias), dw that convolution's
    weight gradient with the roles of input and gradient exchanged (`dw[c, q]` = product chain
    over b, then p, of `x[b, c, p] ⊗ dycol_b[q, p]`), dbias the chain over b, then positions, of
    dy"."""
    x, w, dy = f32(x), f32(w), f32(dy)
    b, c = x.shape[:2]
    k = w.shape[2:]
    og, cg = w.shape[1], c // groups
    dx = conv_forward(dy, w, None, stride, pad, dil, groups)
    assert dx.shape == x.shape, (dx.shape, x.shape)
    x3 = x.reshape(b, c, -1)
    dws = []
    for g in range(groups):
        dycol = columns(dy[:, g * og:(g + 1) * og], k, stride, pad, dil, x.shape[2:])
        dw = None
        for n in range(b):
            dw = mm(x3[n, g * cg:(g + 1) * cg], dycol[n].T, dw)
        dws.append(dw.reshape((cg,) + tuple(w.shape[1:])))
    res = {"dx": dx, "dw": np.concatenate(dws, axis=0).astype(F)}
    if has_bias:
        o = dy.shape[1]
        res["dbias"] = chain(dy.reshape(b, o, -1).transpose(1, 0, 2).reshape(o, -1), 1)
    return res


def conv_transpose(x, w, bias, dy, stride, padding, output_padding, dilation, groups):
    """The probe's `conv_transpose`: y, dx, dw (and dbias with a bias)."""
    y = conv_transpose_forward(x, w, bias, stride, padding, output_padding, dilation, groups)
    res = {"y": y}
    res.update(conv_transpose_backward(x, w, f32(dy).reshape(y.shape), stride, padding, dilation,
                                       groups, bias is not None))
    return res


# ============================================================================================
# Products
# ============================================================================================
def bmm(a, b, c, dy, alpha, beta):
    """**Products**: each output element the product chain over k, batches independent;
    `y = (α ⊗ chain) ⊕ (β ⊗ c)` (without c: `α ⊗ chain`). Backward with the product's upstream
    `u = dy ⊗ α`: `da` = product chain over n of `u ⊗ bᵀ`, `db` = product chain over m of
    `aᵀ ⊗ u`; `dc = dy ⊗ β`."""
    a, b, dy = f32(a), f32(b), f32(dy)
    al, be = F(alpha), F(beta)
    y = al * mm(a, b)
    if c is not None:
        y = y + be * f32(c)
    u = dy * al
    res = {"y": y.astype(F), "da": mm(u, b.transpose(0, 2, 1)), "db": mm(a.transpose(0, 2, 1), u)}
    if c is not None:
        res["dc"] = (dy * be).astype(F)
    return res


# ============================================================================================
# Reductions, softmax
# ============================================================================================
def _reduced(x, dims, keepdim):
    """The reduced elements of each output as the last axis, "taken in the input's storage
    order" (the reduced dimensions in their order, row-major), with the output's shape."""
    nd = x.ndim
    red = sorted(set(d % nd for d in dims))
    kept = [d for d in range(nd) if d not in red]
    v = x.transpose(kept + red).reshape([x.shape[d] for d in kept] + [-1])
    keep_shape = tuple(1 if d in red else x.shape[d] for d in range(nd))
    out_shape = keep_shape if keepdim else tuple(x.shape[d] for d in kept)
    return v, keep_shape, out_shape


def _along_last(v):
    return [v[..., n] for n in range(v.shape[-1])]


def row_chain(v):
    """The chain along the last axis, in order."""
    return chain(v, -1)


def reduce(fn, x, dy, dims, keepdim):
    """**Reductions** over any dimensions. *sum*: their chain; `dx = dy` broadcast. *mean*:
    `chain ⊘ float(count)`; `dx = dy ⊘ float(count)`. *amax*: max_pool2d's rule over them;
    `dx = x = y ? dy ⊘ float(ties) : +0`. *logsumexp*: `m` the largest, taken as 0 when it is
    ±inf; `y = log(chain of exp(x ⊖ m)) ⊕ m`; `dx = dy ⊗ exp(x ⊖ y)`."""
    x = f32(x)
    v, keep_shape, out_shape = _reduced(x, dims, keepdim)
    count = v.shape[-1]
    g = np.broadcast_to(f32(dy).reshape(keep_shape), x.shape)
    if fn == "sum":
        y = row_chain(v)
        dx = g.copy()
    elif fn == "mean":
        y = row_chain(v) / F(count)
        dx = g / F(count)
    elif fn == "amax":
        y, _ = max_rule(_along_last(v))
        yb = np.broadcast_to(y.reshape(keep_shape), x.shape)
        ties = np.broadcast_to((v == y[..., None]).sum(-1).reshape(keep_shape), x.shape)
        dx = pick(x == yb, g / ties.astype(F), ZERO)
    elif fn == "logsumexp":
        m, _ = max_rule(_along_last(v))
        m = pick(np.isinf(m), ZERO, m)
        y = vt_log(row_chain(vt_exp(v - m[..., None]))) + m
        dx = g * vt_exp(x - np.broadcast_to(y.reshape(keep_shape), x.shape))
    else:
        raise ValueError("unknown reduction %r" % fn)
    return {"y": f32(y).reshape(out_shape), "dx": f32(dx)}


def softmax(x, dy, dim):
    """*softmax* over any dimension: the attention softmax of "Operators" with divisor 1,
    non-causal: `z_j = x_j ⊘ 1`, `m` the largest z_j (the first if equal), `e_j = exp(z_j ⊖ m)`,
    `S` = chain of e_j, `p_j = e_j ⊘ S`. Backward: `dot` = chain of `dp_j ⊗ p_j`,
    `dx_j = (p_j ⊗ (dp_j ⊖ dot)) ⊘ 1`."""
    x, dy = np.moveaxis(f32(x), dim, -1), np.moveaxis(f32(dy), dim, -1)
    one = ONE
    z = x / one
    m, _ = max_rule(_along_last(z))
    e = vt_exp(z - m[..., None])
    p = e / row_chain(e)[..., None]
    dot = row_chain(dy * p)
    dx = (p * (dy - dot[..., None])) / one
    return {"y": np.moveaxis(p, -1, dim).astype(F), "dx": np.moveaxis(dx, -1, dim).astype(F)}


def log_softmax(x, dy, dim):
    """*log_softmax*: `m` = the largest, `S` = chain of `exp(x ⊖ m)`, `y = x ⊖ (m ⊕ log(S))`;
    backward `dx = dy ⊖ exp(y) ⊗ (chain of dy)`."""
    x, dy = np.moveaxis(f32(x), dim, -1), np.moveaxis(f32(dy), dim, -1)
    m, _ = max_rule(_along_last(x))
    s = row_chain(vt_exp(x - m[..., None]))
    y = x - (m + vt_log(s))[..., None]
    dx = dy - vt_exp(y) * row_chain(dy)[..., None]
    return {"y": np.moveaxis(y, -1, dim).astype(F), "dx": np.moveaxis(dx, -1, dim).astype(F)}


# ============================================================================================
# Normalisation
# ============================================================================================
def group_norm(x, w, bias, dy, groups, eps):
    """*group_norm*: per (b, g), its C/G channels' values in (c, position) order, mean and
    variance as LayerNorm's (one chain each), `y = ((x ⊖ mean) ⊗ inv) ⊗ w[c] ⊕ bias[c]`;
    backward per (b, g) as LayerNorm's with `dx̂ = dy ⊗ w[c]`, and `dw[c]`, `dbias[c]` chains over
    (b, then position). LayerNorm's: `mean = (chain of x) ⊘ n`,
    `var = (chain of (x ⊖ mean) ⊗ (x ⊖ mean)) ⊘ n`, `inv = 1 ⊘ sqrt(var ⊕ eps)`,
    `S1 = Σ dx̂`, `S2 = Σ dx̂ ⊗ x̂`, `dx = (inv ⊘ n) ⊗ (((n ⊗ dx̂) ⊖ S1) ⊖ x̂ ⊗ S2)`."""
    x, w, bias, dy = f32(x), f32(w), f32(bias), f32(dy)
    b, c = x.shape[:2]
    positions = int(np.prod(x.shape[2:], dtype=np.int64))
    cg = c // groups
    n = F(cg * positions)
    v = x.reshape(b, groups, -1)                      # (c, position) order within a group
    wc = np.repeat(w, positions).reshape(groups, -1)  # w[c] for each value of a group
    bc = np.repeat(bias, positions).reshape(groups, -1)
    mean = row_chain(v) / n
    d = v - mean[..., None]
    var = row_chain(d * d) / n
    inv = ONE / np.sqrt(var + F(eps))
    xhat = (v - mean[..., None]) * inv[..., None]
    y = xhat * wc[None] + bc[None]
    g = dy.reshape(v.shape)
    dxhat = g * wc[None]
    s1, s2 = row_chain(dxhat), row_chain(dxhat * xhat)
    dx = (inv / n)[..., None] * (((n * dxhat) - s1[..., None]) - xhat * s2[..., None])
    # dw[c], dbias[c]: chains over (b, then position) of one channel
    gc = g.reshape(b, c, positions).transpose(1, 0, 2).reshape(c, -1)
    xc = xhat.reshape(b, c, positions).transpose(1, 0, 2).reshape(c, -1)
    return {"y": y.reshape(x.shape).astype(F), "dx": dx.reshape(x.shape).astype(F),
            "dw": row_chain(gc * xc), "db": row_chain(gc)}


# ============================================================================================
# Losses
# ============================================================================================
def nll_loss(logp, target, ignore_index, g):
    """*nll_loss* (mean; ignore_index): over the R rows whose target is not ignored,
    `loss = (chain of (⊖logp[r][t_r])) ⊘ float(R)`; backward `dlogp[r][t_r] = ⊖(g ⊘ float(R))`,
    +0.0 elsewhere."""
    logp = f32(logp)
    rows = [r for r in range(logp.shape[0]) if int(target[r]) != ignore_index]
    count = F(len(rows))
    s = ZERO
    for r in rows:
        s = F(s + -logp[r, int(target[r])])
    dlogp = np.zeros(logp.shape, F)
    grad = -(F(g) / count)
    for r in rows:
        dlogp[r, int(target[r])] = grad
    return {"loss": f32(s / count), "dlogp": dlogp}


def cross_entropy(logits, target, smoothing, g):
    """cross_entropy of "Losses" (ε = 0): per row `m` the largest logit, `S` = chain of
    `exp(x ⊖ m)`, `lse = m ⊕ log(S)`; `loss = (chain over rows of (lse ⊖ x[target])) ⊘ R`;
    backward `scale = g ⊘ R`, `p = exp(x ⊖ m) ⊘ S`, `dx = (p ⊖ [j = target]) ⊗ scale` (the
    subtraction only at the target). With label smoothing ε > 0: `logp_j = x_j ⊖ lse`,
    `L_r` = chain over j of `logp_j`; `loss = (chain over rows of ((1 ⊖ ε) ⊗ (⊖logp_t) ⊕
    (ε ⊘ C) ⊗ (⊖L_r))) ⊘ R`; `dx_j = (p_j ⊖ ((1 ⊖ ε) ⊗ [j = t] ⊕ ε ⊘ C)) ⊗ (g ⊘ R)`."""
    x = f32(logits)
    r_count, c = x.shape
    rows = np.arange(r_count)
    t = np.asarray(target, np.int64)
    m, _ = max_rule(_along_last(x))
    e = vt_exp(x - m[:, None])
    s = row_chain(e)
    lse = m + vt_log(s)
    rf = F(r_count)
    scale = F(g) / rf
    p = e / s[:, None]
    eps = F(smoothing)
    if float(eps) == 0.0:
        loss = chain(lse - x[rows, t]) / rf
        d = p.copy()
        d[rows, t] = d[rows, t] - ONE
        return {"loss": f32(loss), "dlogits": (d * scale).astype(F)}
    logp = x - lse[:, None]
    big_l = row_chain(logp)
    keep, share = ONE - eps, eps / F(c)
    loss = chain(keep * (-logp[rows, t]) + share * (-big_l)) / rf
    onehot = (np.arange(c)[None, :] == t[:, None]).astype(F)
    dx = (p - (keep * onehot + share)) * scale
    return {"loss": f32(loss), "dlogits": dx.astype(F)}


def bce_logits(x, y, g):
    """*binary_cross_entropy_with_logits* (mean, no weights): `mv = max(⊖x, +0)`,
    `l = ((1 ⊖ y) ⊗ x ⊕ mv) ⊕ log(exp(⊖mv) ⊕ exp((⊖x) ⊖ mv))`, `loss = (chain of l) ⊘ n`;
    backward `dx = (σ(x) ⊖ y) ⊗ (g ⊘ n)`. (max(a, +0) is taken as `a > +0 ? a : +0`; its
    choice between ±0 or for NaN changes no output.)"""
    x, y = f32(x), f32(y)
    nx = -x
    mv = pick(nx > ZERO, nx, ZERO)
    lv = ((ONE - y) * x + mv) + vt_log(vt_exp(-mv) + vt_exp(nx - mv))
    n = F(x.size)
    return {"loss": f32(chain(lv.reshape(-1)) / n), "dx": ((sigmoid(x) - y) * (F(g) / n)).astype(F)}


# ============================================================================================
# Recurrent layers (time-major [T, B, I])
# ============================================================================================
ELMAN = ("rnn_tanh", "rnn_relu")  # nn.RNN: h = f(X ⊕ R), f tanh or ReLU


def _rnn_direction_forward(kind, inp, h0, c0, w_ih, w_hh, b_ih, b_hh, reverse, w_hr=None):
    """One layer and direction: `X = x·W_ihᵀ ⊕ b_ih` (Linear's, the T·B rows in (t, b) order),
    then per step (backwards for the reverse direction) `R = h·W_hhᵀ ⊕ b_hh` and the cell; an
    LSTM's projection W_hr [P, H] then makes h `(o ⊗ tanh(c))·W_hrᵀ` (Linear's, no bias)."""
    t_len, b, i_len = inp.shape
    width = w_hh.shape[1]
    hid = w_hr.shape[1] if w_hr is not None else width
    x_all = linear(inp.reshape(t_len * b, i_len), w_ih, b_ih).reshape(t_len, b, -1)
    h, c = h0, c0
    out = np.zeros((t_len, b, width), F)
    steps = {}
    for t in (reversed(range(t_len)) if reverse else range(t_len)):
        r = linear(h, w_hh, b_hh)
        xt = x_all[t]
        if kind == "lstm":
            a = xt + r
            gi = sigmoid(a[:, :hid])
            gf = sigmoid(a[:, hid:2 * hid])
            gg = tanh(a[:, 2 * hid:3 * hid])
            go = sigmoid(a[:, 3 * hid:])
            c_new = gf * c + gi * gg
            h_new = go * tanh(c_new)
            steps[t] = dict(h_prev=h, c_prev=c, i=gi, f=gf, g=gg, o=go, c=c_new)
            c = c_new
            if w_hr is not None:
                steps[t]["u"] = h_new
                h_new = linear(h_new, w_hr, None)
        elif kind in ELMAN:
            a = xt + r
            h_new = tanh(a) if kind == "rnn_tanh" else pick(a <= ZERO, ZERO, a)
            steps[t] = dict(h_prev=h, h=h_new)
        else:
            gr = sigmoid(xt[:, :hid] + r[:, :hid])
            gz = sigmoid(xt[:, hid:2 * hid] + r[:, hid:2 * hid])
            rn = r[:, 2 * hid:]
            gn = tanh(xt[:, 2 * hid:] + gr * rn)
            h_new = (ONE - gz) * gn + gz * h
            steps[t] = dict(h_prev=h, r=gr, z=gz, n=gn, rn=rn)
        h = h_new.astype(F)
        out[t] = h
    return out, h, c, steps


def _rnn_direction_backward(kind, inp, w_ih, w_hh, steps, dout, dhn, dcn, reverse, w_hr=None):
    """Backward through time, steps in reverse order of the forward: `dh = dy_t ⊕ dh_next`, the
    cell's gate gradients, then `dh_next` = product chain over the gate rows of `dR ⊗ W_hh` (GRU:
    plus `dh ⊗ z`, added after). Then Linear's weight and bias gradients of R and of X over the
    T·B rows in (t, b) order, and dx that of X. Projected: the step's dh reaches the cell as
    `dh·W_hr` (a product chain over P), and dW_hr is Linear's weight gradient of the projection
    over the T·B rows in (t, b) order; it is returned last (None without a projection)."""
    t_len, b, i_len = inp.shape
    width = w_hh.shape[1]
    hid = w_hr.shape[1] if w_hr is not None else width
    k = w_hh.shape[0]
    d_r = np.zeros((t_len, b, k), F)  # dR per row (t, b)
    d_x = np.zeros((t_len, b, k), F)  # dX per row (t, b)
    h_prev = np.zeros((t_len, b, width), F)
    dh_proj, unprojected = np.zeros((t_len, b, width), F), np.zeros((t_len, b, hid), F)
    dh_next, dc_next = dhn, dcn
    for t in (range(t_len) if reverse else reversed(range(t_len))):
        s = steps[t]
        dh = dout[t] + dh_next
        h_prev[t] = s["h_prev"]
        if w_hr is not None:
            dh_proj[t], unprojected[t] = dh, s["u"]
            dh = mm(dh, w_hr)
        if kind == "lstm":
            gi, gf, gg, go = s["i"], s["f"], s["g"], s["o"]
            tc = tanh(s["c"])
            dc = (dh * go) * (ONE - tc * tc) + dc_next
            da_o = (dh * tc) * (go * (ONE - go))
            da_i = (dc * gg) * (gi * (ONE - gi))
            da_g = (dc * gi) * (ONE - gg * gg)
            da_f = (dc * s["c_prev"]) * (gf * (ONE - gf))
            dc_next = (dc * gf).astype(F)
            da = np.concatenate([da_i, da_f, da_g, da_o], axis=1)
            d_r[t], d_x[t] = da, da
            dh_next = mm(da, w_hh)
        elif kind in ELMAN:
            h = s["h"]
            da = dh * (ONE - h * h) if kind == "rnn_tanh" else pick(h <= ZERO, ZERO, dh)
            d_r[t], d_x[t] = da, da
            dh_next = mm(da, w_hh)
        else:
            gr, gz, gn, rn = s["r"], s["z"], s["n"], s["rn"]
            dn = dh * (ONE - gz)
            dz = dh * (s["h_prev"] - gn)
            da_n = dn * (ONE - gn * gn)
            dr_n = da_n * gr
            dr = da_n * rn
            da_r = dr * (gr * (ONE - gr))
            da_z = dz * (gz * (ONE - gz))
            d_r[t] = np.concatenate([da_r, da_z, dr_n], axis=1)
            d_x[t] = np.concatenate([da_r, da_z, da_n], axis=1)
            dh_next = (mm(d_r[t], w_hh) + dh * gz).astype(F)
    _, dw_hh, db_hh = linear_backward(h_prev.reshape(t_len * b, width), w_hh, d_r.reshape(t_len * b, k), False)
    dx, dw_ih, db_ih = linear_backward(inp.reshape(t_len * b, i_len), w_ih, d_x.reshape(t_len * b, k))
    dw_hr = None
    if w_hr is not None:
        _, dw_hr, _ = linear_backward(unprojected.reshape(t_len * b, hid), w_hr,
                                      dh_proj.reshape(t_len * b, width), False)
    return dx.reshape(inp.shape), dw_ih, dw_hh, db_ih, db_hh, dh_next, dc_next, dw_hr


def rnn(kind, inputs, layers, bidirectional, hidden, proj=0):
    """**Recurrent layers** (`aten::lstm`, `aten::gru`, `aten::rnn_tanh`, `aten::rnn_relu`), the
    probe's `lstm`, `gru`, `rnn_tanh` and `rnn_relu`: x [T, B, I],
    h0 (c0) [layers·dirs, B, H], weights per layer l and direction suffix s; the layer's output is
    h of every step (both directions concatenated, forward first) and the next layer's x. The
    input of a bidirectional layer feeds two operators: its gradient is the sum of the two, one ⊕.
    The initial h and c get the final `dh_next` and `dc_next`. With `proj` (an LSTM's proj_size)
    each layer and direction has w_hr too, and h is proj wide."""
    lstm = kind == "lstm"
    out_w = proj if proj else hidden
    dirs = 2 if bidirectional else 1
    suffixes = ["", "_reverse"][:dirs]
    x = f32(inputs["x"])
    h0 = f32(inputs["h0"])
    c0 = f32(inputs["c0"]) if lstm else np.zeros_like(h0)
    dy, dhn = f32(inputs["dy"]), f32(inputs["dhn"])
    dcn = f32(inputs["dcn"]) if lstm else np.zeros_like(dhn)
    res = {}
    hn, cn = np.zeros_like(h0), np.zeros_like(c0)
    saved = []
    inp = x
    for layer in range(layers):
        outs, per = [], []
        for d, s in enumerate(suffixes):
            row = layer * dirs + d
            names = ["%s_l%d%s" % (p, layer, s) for p in ("w_ih", "w_hh", "b_ih", "b_hh")]
            w_ih, w_hh, b_ih, b_hh = (f32(inputs[n]) for n in names)
            w_hr = f32(inputs["w_hr_l%d%s" % (layer, s)]) if proj else None
            out, h_last, c_last, steps = _rnn_direction_forward(kind, inp, h0[row], c0[row], w_ih, w_hh,
                                                                b_ih, b_hh, d == 1, w_hr)
            hn[row], cn[row] = h_last, c_last
            outs.append(out)
            per.append((names, w_ih, w_hh, steps, row, w_hr))
        saved.append((inp, per))
        inp = np.concatenate(outs, axis=2)
    res["y"], res["hn"] = inp, hn
    if lstm:
        res["cn"] = cn
    dout = dy
    dh0, dc0 = np.zeros_like(h0), np.zeros_like(c0)
    for layer in reversed(range(layers)):
        inp, per = saved[layer]
        dx = None
        for d, (names, w_ih, w_hh, steps, row, w_hr) in enumerate(per):
            dslice = dout[:, :, d * out_w:(d + 1) * out_w]
            dxd, dw_ih, dw_hh, db_ih, db_hh, dh_first, dc_first, dw_hr = _rnn_direction_backward(
                kind, inp, w_ih, w_hh, steps, dslice, dhn[row], dcn[row], d == 1, w_hr)
            for n, v in zip(names, (dw_ih, dw_hh, db_ih, db_hh)):
                res["d" + n] = f32(v)
            if w_hr is not None:
                res["dw_hr" + names[0][len("w_ih"):]] = f32(dw_hr)
            dh0[row], dc0[row] = dh_first, dc_first
            dx = dxd if dx is None else (dx + dxd).astype(F)
        dout = dx
    res["dx"], res["dh0"] = dout, dh0
    if lstm:
        res["dc0"] = dc0
    return res


# ============================================================================================
# Random operators (the dropout stream of "Random numbers")
# ============================================================================================
def feature_dropout(x, dy, p, state, call):
    """`feature_dropout` (Dropout2d/3d) keeps channel (b, c) of call n when
    `uniform(draw (n << 40) + b·C + c) ≥ p`, for all its positions; kept values as Dropout's:
    `y = kept ? x ⊗ scale : +0.0`, `scale = 1 ⊘ (1 ⊖ p)`; `dx = kept ? dy ⊗ scale : +0.0`."""
    x, dy = f32(x), f32(dy)
    b, c = x.shape[:2]
    pf = F(p)
    counters = (np.uint64(call) << np.uint64(40)) + np.arange(b * c, dtype=np.uint64)
    kept = (uniforms_at(int(state), counters) >= pf).reshape((b, c) + (1,) * (x.ndim - 2))
    kept = np.broadcast_to(kept, x.shape)
    scale = ONE / (ONE - pf)
    return {"y": pick(kept, x * scale, ZERO), "dx": pick(kept, dy * scale, ZERO)}


def uniform(shape, state, call):
    """`torch.rand` (and rand_like, rrelu's slopes) sets element j to
    `uniform(draw (n << 40) + j)`."""
    size = int(np.prod(shape, dtype=np.int64))
    counters = (np.uint64(call) << np.uint64(40)) + np.arange(size, dtype=np.uint64)
    return {"y": uniforms_at(int(state), counters).astype(F).reshape(shape)}


def quarter_cosine(t):
    """cos(t·π/2) for t in [0, 1]: `a = t ⊗ 1.57079637`, `s = a ⊗ a`, Horner over f32(±1/k!)
    from k = 14 down to 2, then `⊕ 1`."""
    a = t * F(1.57079637)
    s = a * a
    p = np.full_like(s, F(-1.0 / math.factorial(14)))
    for k in (12, 10, 8, 6, 4):
        p = p * s + F((1.0 if k % 4 == 0 else -1.0) / math.factorial(k))
    p = p * s + F(-0.5)
    return p * s + ONE


def normal(shape, state, call):
    """`torch.randn` (and randn_like, normal_) sets element j to `r ⊗ c` (Box–Muller):
    `u1 = 1 ⊖ uniform(draw (n << 40) + 2j)`, `r = sqrt((−2) ⊗ log(u1))`, c = cos(2π u2) of
    `u2 = uniform(draw (n << 40) + 2j + 1)` by quarters: `v = u2 ⊗ 4`, `q = floor(v)`,
    `f = v ⊖ q`, `C = quarter_cosine(q odd ? 1 ⊖ f : f)`, `c = q in (1, 2) ? −C : C`."""
    size = int(np.prod(shape, dtype=np.int64))
    first = (np.uint64(call) << np.uint64(40)) + np.uint64(2) * np.arange(size, dtype=np.uint64)
    u1 = ONE - uniforms_at(int(state), first)
    u2 = uniforms_at(int(state), first + np.uint64(1))
    r = np.sqrt(F(-2.0) * vt_log(u1))
    v = u2 * F(4.0)
    q = np.floor(v)
    f = v - q
    odd = (q == F(1.0)) | (q == F(3.0))
    c = quarter_cosine(pick(odd, ONE - f, f))
    c = pick((q == F(1.0)) | (q == F(2.0)), -c, c)
    return {"y": (r * c).astype(F).reshape(shape)}


def randint(n, low, high, state, call):
    """`torch.randint(low, high, size)` sets element j to `low + ⌊d·(high − low) / 2^64⌋`, d the
    whole 64-bit draw (n << 40) + j: int64 in [low, high)."""
    counters = (np.uint64(call) << np.uint64(40)) + np.arange(n, dtype=np.uint64)
    span = (high - low) % (1 << 64)
    values = [(low + ((int(d) * span) >> 64) + (1 << 63)) % (1 << 64) - (1 << 63)
              for d in draws_at(int(state), counters)]
    return {"y": np.array(values, dtype=np.int64)}


def bernoulli_of(p, state, call):
    """`torch.bernoulli(p)` sets element j to 1 when `uniform(draw (n << 40) + j) < p[j]`, else
    0 (NaN p: 0)."""
    p = f32(p)
    counters = (np.uint64(call) << np.uint64(40)) + np.arange(p.size, dtype=np.uint64)
    u = uniforms_at(int(state), counters).reshape(p.shape)
    return {"y": pick(u < p, ONE, ZERO)}


def bernoulli(shape, p, state, call):
    """`bernoulli_(p)` sets element j to 1 when `uniform(draw (n << 40) + j) < p`, else 0."""
    size = int(np.prod(shape, dtype=np.int64))
    counters = (np.uint64(call) << np.uint64(40)) + np.arange(size, dtype=np.uint64)
    u = uniforms_at(int(state), counters)
    return {"y": pick(u < F(p), ONE, ZERO).reshape(shape)}


# ============================================================================================
# The probe's operators by name (tests/kernels/ops_ref_test.py)
# ============================================================================================
def run(op, params, inputs):
    """Outputs of the probe's `op` for `params` and `inputs` (name -> array), as a dict of
    float32 arrays (a float64 anywhere would be a second rounding: refused)."""
    out = _run(op, params, inputs)
    for name, v in out.items():
        if np.asarray(v).dtype != F:
            raise TypeError("%s: output %s is %s, not float32" % (op, name, np.asarray(v).dtype))
    return out


def _run(op, params, inputs):
    p, i = params, inputs
    if op == "act":
        extra = {k: v for k, v in p.items() if k != "fn"}
        return activation(p["fn"], i["x"], i["dy"], **extra)
    if op == "max_pool2d":
        return max_pool2d(i["x"], i["dy"], p["kernel"], p["stride"], p["padding"], p["dilation"],
                          p["ceil_mode"])
    if op == "avg_pool2d":
        return avg_pool2d(i["x"], i["dy"], p["kernel"], p["stride"], p["padding"], p["ceil_mode"],
                          p["count_include_pad"], p["divisor_override"])
    if op == "adaptive_avg_pool2d":
        return adaptive_avg_pool2d(i["x"], i["dy"], p["output"])
    if op == "adaptive_max_pool2d":
        return adaptive_max_pool2d(i["x"], i["dy"], p["output"])
    if op == "upsample_bilinear2d":
        return upsample_bilinear2d(i["x"], i["dy"], p["align_corners"], p["scale_factor"])
    if op == "upsample_nearest":
        return upsample_nearest(i["x"], i["dy"], p["scale_factor"])
    if op == "conv":
        return conv(i["x"], i["w"], i.get("bias"), i["dy"], p["stride"], p["padding"], p["dilation"],
                    p["groups"])
    if op == "conv_transpose":
        return conv_transpose(i["x"], i["w"], i.get("bias"), i["dy"], p["stride"], p["padding"],
                              p["output_padding"], p["dilation"], p["groups"])
    if op == "bmm":
        return bmm(i["a"], i["b"], i.get("c"), i["dy"], p["alpha"], p["beta"])
    if op == "reduce":
        return reduce(p["fn"], i["x"], i["dy"], p["dims"], p["keepdim"])
    if op == "softmax":
        return softmax(i["x"], i["dy"], p["dim"])
    if op == "log_softmax":
        return log_softmax(i["x"], i["dy"], p["dim"])
    if op == "group_norm":
        return group_norm(i["x"], i["w"], i["b"], i["dy"], p["groups"], p["eps"])
    if op == "nll_loss":
        return nll_loss(i["logp"], i["target"], p["ignore_index"], p["g"])
    if op == "cross_entropy":
        return cross_entropy(i["logits"], i["target"], p["smoothing"], p["g"])
    if op == "bce_logits":
        return bce_logits(i["x"], i["target"], p["g"])
    if op in ("lstm", "gru") + ELMAN:
        return rnn(op, i, p["layers"], p["bidirectional"], p["hidden"], p.get("proj", 0))
    if op == "feature_dropout":
        return feature_dropout(i["x"], i["dy"], p["p"], int(p["state"]), p["call"])
    if op == "bernoulli":
        return bernoulli(i["x"].shape, p["p"], int(p["state"]), p["call"])
    if op == "uniform":
        return uniform(i["x"].shape, int(p["state"]), p["call"])
    if op == "normal":
        return normal(i["x"].shape, int(p["state"]), p["call"])
    if op == "bernoulli_of":
        return bernoulli_of(i["x"], int(p["state"]), p["call"])
    raise ValueError("unknown operator %r" % op)
