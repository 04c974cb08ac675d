#!/usr/bin/env python3
"""Rules on operator evidence (docs/dispute.md) from numpy alone: no veritrain code at all.

    referee_ref.py EVIDENCE.json [EVIDENCE.json ...]

The evidence holds one operator call of a provider's signed step trace, the provider's values of
its operands (whole, or the chunks one disputed value is computed from), and the proof that the
call is in the trace it signed. This script checks the proof and the values against the signed
Merkle roots (and both Ed25519 signatures, with the `openssl` program), recomputes the call with
the arithmetic of docs/portable.md (the functions of portable_ref.py, written from that page) and
compares its outputs, or the disputed value, with the provider's, bit for bit. It prints a JSON
ruling on stdout, one line per evidence file, in the order given.
Exit status: 0 the provider's outputs are the documented result, 1 they are not, 2 the evidence
does not hold (malformed, a signature, proof or hash that does not check), 3 an operator or a
form of one this script does not cover; with several files, the largest of theirs.
"""
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import portable_ops_ref as ops  # noqa: E402
import portable_ref as ref  # noqa: E402

F = ref.F
WRONG, BAD, NOT_COVERED = 1, 2, 3
ED25519_SPKI_PREFIX = bytes.fromhex("302a300506032b6570032100")


class Refused(Exception):
    """The evidence does not hold."""


class NotCovered(Exception):
    pass


def canonical(value):
    """veritrain's canonical JSON: sorted keys, no blanks, floats as Python's repr."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


# --- what the provider signed -------------------------------------------------------------
def leaf(call):
    return hashlib.sha256(b"\x00" + canonical(call).encode()).digest()


def node(left, right):
    return hashlib.sha256(b"\x01" + left + right).digest()


def root_from_path(digest, m, lo, hi, path):
    """RFC 6962's tree over calls [lo, hi): the path lists siblings from the leaf upwards."""
    if hi - lo == 1:
        return digest
    if not path:
        raise Refused("the call's proof is too short")
    k = 1
    while k * 2 < hi - lo:
        k *= 2
    sibling = path.pop()
    if m < lo + k:
        return node(root_from_path(digest, m, lo, lo + k, path), sibling)
    return node(sibling, root_from_path(digest, m, lo + k, hi, path))


def verify_signature(public_raw, message, signature):
    """Ed25519 with the openssl program; None when it is not installed."""
    openssl = shutil.which("openssl")
    if openssl is None:
        return None
    with tempfile.TemporaryDirectory() as d:
        pem = os.path.join(d, "key.pem")
        with open(pem, "w") as f:
            body = base64.b64encode(ED25519_SPKI_PREFIX + public_raw).decode()
            f.write("-----BEGIN PUBLIC KEY-----\n%s\n-----END PUBLIC KEY-----\n" % body)
        msg, sig = os.path.join(d, "msg"), os.path.join(d, "sig")
        open(msg, "wb").write(message)
        open(sig, "wb").write(signature)
        r = subprocess.run([openssl, "pkeyutl", "-verify", "-pubin", "-inkey", pem, "-rawin",
                            "-in", msg, "-sigfile", sig], capture_output=True)
        return r.returncode == 0


CHUNK = 1024  # an operand's Merkle leaves: 1 KiB of its canonical bytes
DTYPES = {"f32": "<f4", "i64": "<i8"}


def operand_root(raw):
    """The Merkle root of an operand's bytes over 1 KiB leaves; SHA-256 of nothing when empty.
    Level by level, a trailing odd node moving up unchanged: RFC 6962's tree."""
    if not raw:
        return hashlib.sha256(b"").digest()
    level = [hashlib.sha256(b"\x00" + raw[i:i + CHUNK]).digest()
             for i in range(0, len(raw), CHUNK)]
    while len(level) > 1:
        level = [node(level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)] + \
            ([level[-1]] if len(level) % 2 else [])
    return level[0]


def chunk_in_root(root, chunk, index, count, path):
    """Whether `chunk` is chunk `index` of `count` of the bytes whose root is `root`."""
    if index >= count or not chunk or len(chunk) > CHUNK or \
            (index + 1 < count and len(chunk) != CHUNK):
        return False
    h, used, n = hashlib.sha256(b"\x00" + chunk).digest(), 0, count
    while n > 1:
        if index % 2 == 1 or index + 1 < n:
            if used == len(path):
                return False
            h = node(path[used], h) if index % 2 == 1 else node(h, path[used])
            used += 1
        n, index = (n + 1) // 2, index // 2
    return used == len(path) and h == root


def operand_arrays(values, hashes, what):
    """The values as numpy arrays by name, each checked against the signed root, and for each
    operand given in part the set of its chunks given (None: whole). Values outside the given
    chunks are NaN (f32) or 0 (i64)."""
    if len(values) != len(hashes):
        raise Refused("%s: %d operands given, the trace has %d" % (what, len(values), len(hashes)))
    out, given = {}, {}
    for v, h in zip(values, hashes):
        dtype = np.dtype(DTYPES[h["dtype"]])
        if (v["name"], v["dtype"]) != (h["name"], h["dtype"]):
            raise Refused("%s %s: not the call's operand" % (what, h["name"]))
        if "base64" in v:
            raw = base64.b64decode(v["base64"], validate=True)
            if len(raw) != h["count"] * dtype.itemsize or \
                    operand_root(raw).hex() != h["root"]:
                raise Refused("%s %s: the values given are not the ones the signed trace hashes"
                              % (what, h["name"]))
            given[h["name"]] = None
        else:
            size = h["count"] * dtype.itemsize
            if size > 1 << 30:
                raise Refused("%s %s: too many values for evidence in part" % (what, h["name"]))
            buf = np.full(h["count"], np.nan if h["dtype"] == "f32" else 0, dtype=dtype)
            raw = bytearray(buf.tobytes())
            count, seen = (size + CHUNK - 1) // CHUNK, []
            for c in v["chunks"]:
                chunk = base64.b64decode(c["base64"], validate=True)
                path = [bytes.fromhex(x) for x in c["path"]]
                if (seen and c["index"] <= seen[-1]) or not chunk_in_root(
                        bytes.fromhex(h["root"]), chunk, c["index"], count, path):
                    raise Refused("%s %s: chunk %d is not part of the values the provider signed"
                                  % (what, h["name"], c["index"]))
                raw[c["index"] * CHUNK:c["index"] * CHUNK + len(chunk)] = chunk
                seen.append(c["index"])
            raw = bytes(raw)
            given[h["name"]] = set(seen)
        out[v["name"]] = np.frombuffer(raw, dtype=dtype).copy() if h["count"] else None
    return out, given


# --- evidence for one value (docs/dispute.md) ---------------------------------------------
ELEMENTWISE = {"relu", "relu_backward", "gelu", "gelu_backward", "dropout", "dropout_backward",
               "bernoulli", "bernoulli_of", "uniform", "normal", "sgd_update", "adam_update", "scale_gradient",
               "ema_update"}
ROW_WISE = {"softmax", "softmax_backward", "log_softmax", "log_softmax_backward", "layer_norm"}


def cone(call, params, output, index):
    """The spans (side, operand name, begin, end) value `index` of `output` is computed from,
    as docs/dispute.md's table of them says; None where the operator is ruled on whole operands."""
    ins = {h["name"]: h["count"] for h in call["inputs"]}
    outs = {h["name"]: h["count"] for h in call["outputs"]}
    op, spans = call["op"], []
    if op in ELEMENTWISE or op.replace("_backward", "") in ACTIVATIONS:
        n = outs[call["outputs"][0]["name"]]
        for name, count in ins.items():
            if count and count != n:
                return None
            if count:
                spans.append(("input", name, index, index + 1))
        return spans
    if op in ROW_WISE:
        rows, width = params["rows"], params["width"]
        row = index if outs[output] == rows else index // width
        for name, count in ins.items():
            if count:
                spans.append(("input", name, 0, width) if count == width else
                             ("input", name, row * width, (row + 1) * width))
        return spans
    if op == "gemm":
        m, n, k = params["m"], params["n"], params["k"]
        if min(m, n, k) <= 0 or k > 1 << 16:
            return None
        b, i, j = index // (m * n), index // n % m, index % n
        spans = [("input", "a", (b * m + i) * k, (b * m + i + 1) * k)]
        spans += [("input", "b", (b * k + t) * n + j, (b * k + t) * n + j + 1) for t in range(k)]
        return spans + ([("input", "c", index, index + 1)] if params["accumulate"] else [])
    if op == "add_bias":
        return [("input", "y", index, index + 1),
                ("input", "bias", index % params["cols"], index % params["cols"] + 1)]
    if op in ("batch_norm_train", "batch_norm_eval"):
        b, ch, s = params["batch"], params["channels"], params["spatial"]
        if min(b, ch, s) <= 0 or ins.get("x") != b * ch * s or outs.get("y") != b * ch * s or \
                any(n not in (0, ch) for name, n in outs.items() if name != "y"):
            return None
        c = index // s % ch if output == "y" else index
        spans = [("input", w, c, c + 1) for w in ("weight", "bias") if ins.get(w)]
        if op == "batch_norm_eval":
            return spans + [("input", "x", index, index + 1), ("input", "running_mean", c, c + 1),
                            ("input", "running_var", c, c + 1)]
        if output == "y":
            return spans + [("input", "x", index, index + 1), ("output", "mean", c, c + 1),
                            ("output", "invstd", c, c + 1)]
        return [("input", "x", (bi * ch + c) * s, (bi * ch + c + 1) * s) for bi in range(b)] + \
            [("input", r, c, c + 1) for r in ("running_mean", "running_var") if ins.get(r)]
    return None


def covered(given, name, itemsize, begin, end):
    chunks = given.get(name)
    if chunks is None:
        return name in given
    first, last = begin * itemsize // CHUNK, (end * itemsize - 1) // CHUNK
    return all(c in chunks for c in range(first, last + 1))


def rule_one_value(e, call, params, inputs, in_given, claimed, out_given):
    output, index = e["disputed"]["output"], e["disputed"]["index"]
    counts = {h["name"]: h["count"] for h in call["outputs"]}
    if output not in counts or not 0 <= index < counts[output]:
        raise Refused("the disputed value is not a value of an output of the call")
    spans = cone(call, params, output, index)
    if spans is None:
        raise Refused("%s is ruled on whole operands only" % call["op"])
    sizes = {h["name"]: np.dtype(DTYPES[h["dtype"]]).itemsize
             for h in call["inputs"] + call["outputs"]}
    for side, name, begin, end in spans + [("output", output, index, index + 1)]:
        given = in_given if side == "input" else out_given
        if not covered(given, name, sizes[name], begin, end):
            raise Refused("the evidence does not give %s[%d, %d), which the disputed value reads"
                          % (name, begin, end))
    if call["op"] == "batch_norm_train" and output == "y":
        c = index // params["spatial"] % params["channels"]
        w = inputs["weight"][c] if inputs.get("weight") is not None else F(1.0)
        bias = inputs["bias"][c] if inputs.get("bias") is not None else F(0.0)
        v = ((inputs["x"][index] - claimed["mean"][c]) * claimed["invstd"][c]) * w + bias
        ours = F(0.0) if params["relu"] and v <= F(0.0) else F(v)
    else:
        with np.errstate(all="ignore"):
            mine = OPERATORS[call["op"]](params, inputs, counts)
        ours = np.ascontiguousarray(mine[output]).reshape(-1)[index]
    theirs = claimed[output][index]
    same = np.asarray(ours, dtype=theirs.dtype).tobytes() == np.asarray(theirs).tobytes()
    return {"ruling": "provider_correct" if same else "provider_wrong", "operator": call["op"],
            "call": call["index"], "epoch": e["header"]["epoch"], "step": e["header"]["step"],
            "differing_outputs": [] if same else
            ["%s[%d] (the one value in dispute)" % (output, index)]}


# --- the operators (docs/portable.md) -----------------------------------------------------
def softmax(x, rows, width, divisor, causal):
    z = x.reshape(rows, width) / F(divisor)
    valid = np.ones((rows, width), bool)
    if causal:
        valid = np.arange(width)[None, :] <= (np.arange(rows) % width)[:, None]
    m = np.max(np.where(valid, z, F(-np.inf)), axis=1)
    e = np.where(valid, ref.vt_exp(z - m[:, None]), F(0.0))
    return np.where(valid, e / ref.chain(e, 1)[:, None], F(0.0)), valid


def softmax_backward(y, dy, rows, width, divisor, causal):
    y, dy = y.reshape(rows, width), dy.reshape(rows, width)
    valid = np.ones((rows, width), bool)
    if causal:
        valid = np.arange(width)[None, :] <= (np.arange(rows) % width)[:, None]
    dot = ref.chain(np.where(valid, dy * y, F(0.0)), 1)
    return np.where(valid, (y * (dy - dot[:, None])) / F(divisor), F(0.0))


def log_softmax(a, i, o):
    x = i["x"].reshape(a["rows"], a["width"])
    m = np.max(x, axis=1)
    lse = m + ref.vt_log(ref.chain(ref.vt_exp(x - m[:, None]), 1))
    return {"y": x - lse[:, None]}


def log_softmax_backward(a, i, o):
    y, dy = i["y"].reshape(a["rows"], a["width"]), i["dy"].reshape(a["rows"], a["width"])
    return {"dx": dy - ref.vt_exp(y) * ref.chain(dy, 1)[:, None]}


def kept(n, p, state, call):
    j = np.arange(n, dtype=np.uint64) + (np.uint64(call) << np.uint64(40))
    return ref.uniforms_at(state, j) >= F(p)


def batch_norm(a, i, o):
    b, c, s = a["batch"], a["channels"], a["spatial"]
    v = i["x"].reshape(b, c, s).transpose(1, 0, 2).reshape(c, -1)
    n = v.shape[1]
    w = i["weight"] if i["weight"] is not None else np.ones(c, F)
    bias = i["bias"] if i["bias"] is not None else np.zeros(c, F)
    mean, var = ref.moments(v, n, ref.lanes)
    inv = F(1.0) / np.sqrt(var + F(a["eps"]))
    y = ((v - mean[:, None]) * inv[:, None]) * w[:, None] + bias[:, None]
    if a["relu"]:
        y = ref.relu(y)
    out = {"y": y.reshape(c, b, s).transpose(1, 0, 2), "mean": mean, "invstd": inv}
    keep, momentum, count = F(1.0) - F(a["momentum"]), F(a["momentum"]), F(n)
    if i["running_mean"] is not None:
        out["running_mean"] = keep * i["running_mean"] + momentum * mean
    if i["running_var"] is not None:
        out["running_var"] = keep * i["running_var"] + momentum * (var * (count / (count - F(1.0))))
    return out


def batch_norm_backward(a, i, o):
    b, c, s = a["batch"], a["channels"], a["spatial"]
    per_channel = lambda t: t.reshape(b, c, s).transpose(1, 0, 2).reshape(c, -1)  # noqa: E731
    v, g = per_channel(i["x"]), per_channel(i["dy"])
    if i["relu_y"] is not None:
        g = ref.relu_backward(per_channel(i["relu_y"]), g)
    w = i["weight"] if i["weight"] is not None else np.ones(c, F)
    dx, xhat = ref.norm_backward(v, i["mean"], i["invstd"], w[:, None], g, v.shape[1], ref.lanes)
    return {"dx": dx.reshape(c, b, s).transpose(1, 0, 2), "dweight": ref.lanes(g * xhat),
            "dbias": ref.lanes(g)}


def layer_norm(a, i, o):
    rows, width = a["rows"], a["width"]
    v = i["x"].reshape(rows, width)
    w = i["weight"] if i["weight"] is not None else np.ones(width, F)
    bias = i["bias"] if i["bias"] is not None else np.zeros(width, F)
    mean, var = ref.moments(v, width)
    inv = F(1.0) / np.sqrt(var + F(a["eps"]))
    return {"y": ((v - mean[:, None]) * inv[:, None]) * w + bias, "mean": mean, "rstd": inv}


def layer_norm_backward(a, i, o):
    rows, width = a["rows"], a["width"]
    v, g = i["x"].reshape(rows, width), i["dy"].reshape(rows, width)
    w = i["weight"] if i["weight"] is not None else np.ones(width, F)
    dx, xhat = ref.norm_backward(v, i["mean"], i["rstd"], w[None, :], g, width)
    return {"dx": dx, "dweight": ref.chain(g * xhat, 0), "dbias": ref.chain(g, 0)}


def adam_update(a, i, o):
    p, g, m, v = i["param"], i["grad"], i["exp_avg"], i["exp_avg_sq"]
    wd = F(a["weight_decay"])
    if a["decoupled"]:
        p = p * (F(1.0) - F(a["lr"]) * wd)
    elif wd != F(0.0):
        g = g + wd * p
    m = m + (F(1.0) - F(a["beta1"])) * (g - m)
    v = v * F(a["beta2"]) + (F(1.0) - F(a["beta2"])) * (g * g)
    den = np.sqrt(v) / F(a["bias2_sqrt"]) + F(a["eps"])
    return {"param": p - F(a["lr_over_bias1"]) * (m / den), "exp_avg": m, "exp_avg_sq": v}


def sgd_update(a, i, o):
    p, d, buf = i["param"], i["grad"], i["buffer"]
    if F(a["weight_decay"]) != F(0.0):
        d = d + F(a["weight_decay"]) * p
    out = {}
    if buf is not None:
        buf = d.copy() if a["first"] else buf * F(a["momentum"]) + d
        d = d + F(a["momentum"]) * buf if a["nesterov"] else buf
        out["buffer"] = buf
    out["param"] = p - F(a["lr"]) * d
    return out


def clip_coefficient(a, i, o):
    """docs/portable.md, "Gradient clipping": the coefficient from the parts."""
    parts = i["parts"] if i["parts"] is not None else np.zeros(0, F)
    if a["inf"]:
        norm = F(np.nan) if np.isnan(parts).any() else (F(parts.max()) if parts.size else F(0.0))
    else:
        norm = np.sqrt(ref.lanes(parts) if parts.size else F(0.0))
    c = F(a["max_norm"]) / (norm + F(1e-6))
    if not np.isnan(c) and c > F(1.0):
        c = F(1.0)
    return {"coefficient": np.array([c], F)}


def conv_arrays(a, i):
    if a["groups"] != 1 or any(a["dilation_" + d] != 1 for d in "dhw"):
        raise NotCovered("a grouped or dilated convolution")
    spatial = [a["in_" + d] for d in "dhw"]
    kernel = [a["kernel_" + d] for d in "dhw"]
    x = i["x"].reshape([a["batch"], a["in_channels"]] + spatial) if i["x"] is not None else None
    w = i["w"].reshape([a["out_channels"], a["in_channels"]] + kernel)
    return x, w, [a["stride_" + d] for d in "dhw"], [a["padding_" + d] for d in "dhw"]


def conv(a, i, o):
    x, w, stride, pad = conv_arrays(a, i)
    return {"y": ref.conv(x, w, i["bias"], stride, pad)}


def conv_backward(a, i, o):
    x, w, stride, pad = conv_arrays(a, i)
    if x is None:
        raise NotCovered("a convolution backward without its input")
    out = ref.conv_shape(x, w, stride, pad)
    dy = i["dy"].reshape([a["batch"], a["out_channels"]] + out)
    dx, dw, db = ref.conv_backward(x, w, dy, stride, pad, o["dx"] > 0, o["dbias"] > 0)
    return {"dx": dx, "dw": dw, "dbias": db}


def gemm(a, i, o):
    b, m, n, k = a["batch"], a["m"], a["n"], a["k"]
    start = i["c"].reshape(b, m, n) if a["accumulate"] else None
    return {"c": ref.mm(i["a"].reshape(b, m, k), i["b"].reshape(b, k, n), start)}


def cross_entropy(a, i, o):
    loss, saved = ref.cross_entropy(i["logits"].reshape(a["rows"], a["classes"]), i["targets"])
    return {"loss": np.array([loss], F), "row_max": saved[2], "row_sum": saved[3]}


def cross_entropy_backward(a, i, o):
    logits = i["logits"].reshape(a["rows"], a["classes"])
    saved = (logits, i["targets"], i["row_max"], i["row_sum"])
    return {"dlogits": ref.cross_entropy_backward(saved, a["dloss"])}


def dropout(a, i, o, backward):
    n, p = a["n"], a["p"]
    mask = kept(n, p, a["state"] & (2 ** 64 - 1), a["call"] & (2 ** 64 - 1))
    scale = F(1.0) / (F(1.0) - F(p))
    src = i["dy" if backward else "x"]
    return {"dx" if backward else "y": np.where(mask, src * scale, F(0.0))}


def planes(a, v, size):
    """A pool's operand as [planes, 1, h, w] (the trace's B·C planes)."""
    return v.reshape(a["planes"], 1, *size)


def pool_sizes(a):
    return (a["in_h"], a["in_w"]), (a["out_h"], a["out_w"])


def max_windows(a):
    """max_pool2d's window positions, per output row and column (positions outside skipped)."""
    return ([[i * a["stride_h"] - a["pad_h"] + k * a["dilation_h"] for k in range(a["kernel_h"])]
             for i in range(a["out_h"])],
            [[j * a["stride_w"] - a["pad_w"] + k * a["dilation_w"] for k in range(a["kernel_w"])]
             for j in range(a["out_w"])])


def adaptive_windows(a):
    (h, w), (oh, ow) = pool_sizes(a)
    return ([list(range(*ops.adaptive_span(i, h, oh))) for i in range(oh)],
            [list(range(*ops.adaptive_span(j, w, ow))) for j in range(ow)])


def max_pool(a, i, windows):
    size, _ = pool_sizes(a)
    y, arg = ops._max_windows(planes(a, i["x"], size), *windows)
    return {"y": y, "argmax": arg}


def max_pool_backward(a, i, o):
    size, out = pool_sizes(a)
    shape = (a["planes"], 1) + size
    return {"dx": ops._max_backward(shape, planes(a, i["argmax"], out), planes(a, i["dy"], out))}


def avg_windows(a):
    """avg_pool2d's windows at the traced output size: rows [i·s − p, min(i·s − p + k, H + p)),
    clipped to the input, and the divisor (override, or the size with or without padding)."""
    (h, w), (oh, ow) = pool_sizes(a)

    def span(i, k, s, p, size):
        start = i * s - p
        end = min(start + k, size + p)
        return start, end, max(start, 0), min(end, size)

    windows = []
    for r in range(oh):
        hs, he, r0, r1 = span(r, a["kernel_h"], a["stride_h"], a["pad_h"], h)
        row = []
        for c in range(ow):
            ws, we, c0, c1 = span(c, a["kernel_w"], a["stride_w"], a["pad_w"], w)
            if a["divisor_override"]:
                divisor = a["divisor_override"]
            elif a["count_include_pad"]:
                divisor = (he - hs) * (we - ws)
            else:
                divisor = (r1 - r0) * (c1 - c0)
            row.append(((r0, r1), (c0, c1), divisor))
        windows.append(row)
    return windows


def adaptive_avg_windows(a):
    rows, cols = adaptive_windows(a)
    return [[((r[0], r[-1] + 1), (c[0], c[-1] + 1), len(r) * len(c)) for c in cols] for r in rows]


def avg_pool(a, i, windows, backward):
    """Forward or backward of an average pool over `windows` (the other side's operand zero)."""
    size, out = pool_sizes(a)
    shape, out_shape = (a["planes"], 1) + size, (a["planes"], 1) + out
    x = np.zeros(shape, F) if backward else planes(a, i["x"], size)
    dy = planes(a, i["dy"], out) if backward else np.zeros(out_shape, F)
    res = ops._avg_windows(x, dy, windows)
    return {"dx": res["dx"]} if backward else {"y": res["y"]}


def upsample(a, i, backward):
    """*upsample_bilinear2d* at the call's recorded ratios (the other side's operand zero)."""
    size, out = pool_sizes(a)
    x = np.zeros((a["planes"], 1) + size, F) if backward else planes(a, i["x"], size)
    dy = planes(a, i["dy"], out) if backward else np.zeros((a["planes"], 1) + out, F)
    res = ops.upsample_bilinear2d_at(x, dy, bool(a["align_corners"]), F(a["scale_h"]),
                                     F(a["scale_w"]))
    return {"dx": res["dx"]} if backward else {"y": res["y"]}


def upsample_nearest(a, i, backward):
    """*upsample_nearest* of [planes, D, H, W] at the call's recorded ratios."""
    size = tuple(a["in_" + d] for d in "dhw")
    out = tuple(a["out_" + d] for d in "dhw")
    x = np.zeros((a["planes"], 1) + size, F) if backward else i["x"].reshape((a["planes"], 1) + size)
    dy = i["dy"].reshape((a["planes"], 1) + out) if backward else np.zeros((a["planes"], 1) + out, F)
    res = ops.upsample_nearest_at(x, dy, [F(a["scale_" + d]) for d in "dhw"])
    return {"dx": res["dx"]} if backward else {"y": res["y"]}


def group_norm(a, i, o, backward):
    """*group_norm*: each (b, g) row a layer norm's over its C/G channels' values in (c, s) order,
    with w[c], bias[c] per channel; the backward from the mean and rstd the call was given."""
    b, c, s, g = a["batch"], a["channels"], a["spatial"], a["groups"]
    width = c // g * s
    v = i["x"].reshape(b * g, width)

    def per_value(p, absent):  # a per-channel parameter at each value of the rows
        p = p if p is not None else np.full(c, absent, F)
        return np.tile(np.repeat(p, s).reshape(g, width), (b, 1))

    w = per_value(i["weight"], 1.0)
    if not backward:
        bias = per_value(i["bias"], 0.0)
        mean, var = ref.moments(v, width)
        inv = F(1.0) / np.sqrt(var + F(a["eps"]))
        return {"y": ((v - mean[:, None]) * inv[:, None]) * w + bias, "mean": mean, "rstd": inv}
    dy = i["dy"].reshape(b * g, width)
    dx, xhat = ref.norm_backward(v, i["mean"], i["rstd"], w, dy, width)
    gc = dy.reshape(b, c, s).transpose(1, 0, 2).reshape(c, -1)  # (b, then s) per channel
    xc = xhat.reshape(b, c, s).transpose(1, 0, 2).reshape(c, -1)
    return {"dx": dx, "dweight": ref.chain(gc * xc, 1), "dbias": ref.chain(gc, 1)}


def baddbmm(a, i, o, backward):
    b, m, n, k = a["batch"], a["m"], a["n"], a["k"]
    x, y = i["a"].reshape(b, m, k), i["b"].reshape(b, k, n)
    if not backward:
        c = i["c"].reshape(b, m, n) if i["c"] is not None else None
        return {"y": ops.bmm(x, y, c, np.zeros((b, m, n), F), a["alpha"], a["beta"])["y"]}
    return ops.bmm(x, y, np.zeros((b, m, n), F), i["dy"].reshape(b, m, n), a["alpha"], a["beta"])


def rnn(a, i, o, backward):
    """One layer and direction of an LSTM (cell 0), GRU (cell 1) or Elman RNN (cell 2 tanh, 3
    ReLU): forward keeps each step's gate activations [T, B, G] then c (LSTM) or R_n (GRU)
    [T, B, H] (an Elman cell: its output alone), then, with an LSTM's projection (proj),
    o ⊗ tanh(c) [T, B, H], by time index; backward reads them, with y and h0 (c0) for the states
    each step started from."""
    kind = ("lstm", "gru", "rnn_tanh", "rnn_relu")[a["cell"]]
    lstm, elman = kind == "lstm", kind in ops.ELMAN
    t_len, b, n_in, hid = a["steps"], a["batch"], a["input"], a["hidden"]
    proj = a.get("proj", 0) if lstm else 0
    width = proj or hid
    g = {"lstm": 4, "gru": 3}.get(kind, 1) * hid
    reverse = bool(a["reverse"])
    x = i["x"].reshape(t_len, b, n_in)
    h0 = i["h0"].reshape(b, width)
    c0 = i["c0"].reshape(b, hid) if lstm else np.zeros((b, hid), F)
    w_ih, w_hh = i["w_ih"].reshape(g, n_in), i["w_hh"].reshape(g, width)
    w_hr = i["w_hr"].reshape(proj, hid) if proj else None
    gates = ("i", "f", "g", "o") if lstm else ("h",) if elman else ("r", "z", "n")
    kept = "c" if lstm else "rn"
    if not backward:
        y, h, c, steps = ops._rnn_direction_forward(kind, x, h0, c0, w_ih, w_hh, i["b_ih"],
                                                    i["b_hh"], reverse, w_hr)
        acts = np.stack([np.concatenate([steps[t][k] for k in gates], axis=1)
                         for t in range(t_len)])
        extra = np.zeros(0, F) if elman else np.stack([steps[t][kept] for t in range(t_len)])
        unprojected = np.stack([steps[t]["u"] for t in range(t_len)]) if proj else np.zeros(0, F)
        return {"y": y, "hn": h, "cn": c,
                "saved": np.concatenate([acts.ravel(), extra.ravel(),
                                         unprojected.ravel()]).astype(F)}
    y = i["y"].reshape(t_len, b, width)
    tbg, tbh = t_len * b * g, t_len * b * hid
    acts = i["saved"][:tbg].reshape(t_len, b, g)
    extra = None if elman else i["saved"][tbg:tbg + tbh].reshape(t_len, b, hid)
    unprojected = i["saved"][tbg + tbh:].reshape(t_len, b, hid) if proj else None
    order = list(reversed(range(t_len))) if reverse else list(range(t_len))
    steps = {}
    for n, t in enumerate(order):
        before = order[n - 1] if n else None
        s = {k: acts[t][:, j * hid:(j + 1) * hid] for j, k in enumerate(gates)}
        s["h_prev"] = h0 if before is None else y[before]
        if not elman:
            s[kept] = extra[t]
        if lstm:
            s["c_prev"] = c0 if before is None else extra[before]
        if proj:
            s["u"] = unprojected[t]
        steps[t] = s
    dhn = i["dhn"].reshape(b, width) if i["dhn"] is not None else np.zeros((b, width), F)
    dcn = i["dcn"].reshape(b, hid) if lstm and i["dcn"] is not None else np.zeros((b, hid), F)
    dx, dw_ih, dw_hh, db_ih, db_hh, dh0, dc0, dw_hr = ops._rnn_direction_backward(
        kind, x, w_ih, w_hh, steps, i["dy"].reshape(t_len, b, width), dhn, dcn, reverse, w_hr)
    res = {"dx": dx, "dh0": dh0, "dc0": dc0, "dw_ih": dw_ih, "dw_hh": dw_hh, "db_ih": db_ih,
           "db_hh": db_hh}
    if proj:
        res["dw_hr"] = dw_hr
    return res


def smoothed(a, i, o, backward):
    """cross_entropy with label smoothing eps: forward from the logits (saving each row's max and
    chain of exp); backward from the row_max and row_sum the call was given."""
    rows, classes, eps = a["rows"], a["classes"], F(a["eps"])
    x, t = i["logits"].reshape(rows, classes), i["targets"]
    if not backward:
        m, _ = ops.max_rule(ops._along_last(x))
        s = ops.row_chain(ops.vt_exp(x - m[:, None]))
        loss = ops.cross_entropy(x, t, eps, F(1.0))["loss"]
        return {"loss": np.array([loss], F), "row_max": m, "row_sum": s}
    p = ops.vt_exp(x - i["row_max"][:, None]) / i["row_sum"][:, None]
    onehot = (np.arange(classes)[None, :] == t[:, None]).astype(F)
    target = (F(1.0) - eps) * onehot + eps / F(classes)
    return {"dlogits": (p - target) * (F(a["dloss"]) / F(rows))}


REDUCTIONS = ("sum", "mean", "amax", "logsumexp")


def reduction(a, i, o, backward):
    """A reduction over the dimensions flagged reduced_d of an input of sizes size_d; the
    backward of amax and logsumexp from the x and y the call was given."""
    fn = REDUCTIONS[a["kind"]]
    sizes = [a["size_%d" % d] for d in range(a["rank"])]
    dims = [d for d in range(a["rank"]) if a["reduced_%d" % d]]
    shape = tuple(sizes)
    keep = tuple(1 if d in dims else sizes[d] for d in range(len(sizes)))
    if not backward:
        no_dy = np.zeros(int(np.prod(keep, dtype=np.int64)), F)
        return {"y": ops.reduce(fn, i["x"].reshape(shape), no_dy, dims, True)["y"]}
    g = np.broadcast_to(i["dy"].reshape(keep), shape)
    count = int(np.prod([sizes[d] for d in dims], dtype=np.int64))
    if fn == "sum":
        return {"dx": g.copy()}
    if fn == "mean":
        return {"dx": g / F(count)}
    x = i["x"].reshape(shape)
    yb = np.broadcast_to(i["y"].reshape(keep), shape)
    if fn == "logsumexp":
        return {"dx": g * ops.vt_exp(x - yb)}
    ties = np.broadcast_to((x == yb).sum(axis=tuple(dims), keepdims=True), shape)
    return {"dx": np.where(x == yb, g / ties.astype(F), F(0.0))}


def batch_norm_eval(a, i, o):
    """A batch norm in evaluation: `y = ((x ⊖ running_mean) ⊗ inv) ⊗ w ⊕ bias` per channel,
    `inv = 1 ⊘ sqrt(running_var ⊕ eps)`."""
    b, c, s = a["batch"], a["channels"], a["spatial"]
    x = i["x"].reshape(b, c, s)
    w = i["weight"] if i["weight"] is not None else np.ones(c, F)
    bias = i["bias"] if i["bias"] is not None else np.zeros(c, F)
    inv = F(1.0) / np.sqrt(i["running_var"] + F(a["eps"]))
    return {"y": ((x - i["running_mean"][:, None]) * inv[:, None]) * w[:, None] + bias[:, None]}


OPERATORS = {
    "gemm": gemm,
    "column_sums": lambda a, i, o: {"out": ref.chain(i["x"].reshape(a["rows"], a["cols"]), 0)},
    "add_bias": lambda a, i, o: {"y": i["y"].reshape(a["rows"], a["cols"]) + i["bias"]},
    "relu": lambda a, i, o: {"y": ref.relu(i["x"])},
    "relu_backward": lambda a, i, o: {"dx": ref.relu_backward(i["y"], i["dy"])},
    "gelu": lambda a, i, o: {"y": ref.gelu(i["x"])},
    "gelu_backward": lambda a, i, o: {"dx": i["dy"] * ref.gelu_grad(i["x"])},
    "dropout": lambda a, i, o: dropout(a, i, o, False),
    "dropout_backward": lambda a, i, o: dropout(a, i, o, True),
    "row_mean": lambda a, i, o: {
        "y": ref.chain(i["x"].reshape(a["rows"], a["width"]), 1) / F(a["width"])},
    "row_mean_backward": lambda a, i, o: {
        "dx": np.repeat((i["dy"] / F(a["width"]))[:, None], a["width"], axis=1)},
    "mse": lambda a, i, o: {"loss": np.array([ref.mse(i["a"], i["b"])[0]], F)},
    "mse_backward": lambda a, i, o: {"da": ref.mse_backward((i["a"], i["b"]), a["dloss"])},
    "embedding": lambda a, i, o: {"y": i["table"].reshape(-1, a["width"])[i["ids"]]},
    "embedding_backward": lambda a, i, o: {"dtable": ref.embedding_backward(
        i["ids"], i["dy"].reshape(a["count"], a["width"]), a["rows"])},
    "softmax": lambda a, i, o: {"y": softmax(i["x"], a["rows"], a["width"], a["divisor"],
                                             a["causal"])[0]},
    "softmax_backward": lambda a, i, o: {"dx": softmax_backward(
        i["y"], i["dy"], a["rows"], a["width"], a["divisor"], a["causal"])},
    "log_softmax": log_softmax,
    "log_softmax_backward": log_softmax_backward,
    "cross_entropy": cross_entropy,
    "cross_entropy_backward": cross_entropy_backward,
    "batch_norm_train": batch_norm,
    "batch_norm_backward": batch_norm_backward,
    "layer_norm": layer_norm,
    "layer_norm_backward": layer_norm_backward,
    "sgd_update": sgd_update,
    "sum_of_squares": lambda a, i, o: {"sum": np.array([ref.clip_sum(i["x"] * i["x"])], F)},
    "abs_max": lambda a, i, o: {"max": np.array([ref.abs_max(i["x"])], F)},
    "clip_coefficient": clip_coefficient,
    "scale_gradient": lambda a, i, o: {"x": i["x"] if F(a["c"]) == F(1.0) else (i["x"] * F(a["c"])).astype(F)},
    "adam_update": adam_update,
    "ema_update": lambda a, i, o: {"average": (i["average"] * F(a["decay"]) + i["live"] * F(a["one_minus_decay"])).astype(F)},
    "conv": conv,
    "conv_backward": conv_backward,
    "max_pool2d": lambda a, i, o: max_pool(a, i, max_windows(a)),
    "adaptive_max_pool2d": lambda a, i, o: max_pool(a, i, adaptive_windows(a)),
    "max_pool2d_backward": max_pool_backward,
    "avg_pool2d": lambda a, i, o: avg_pool(a, i, avg_windows(a), False),
    "avg_pool2d_backward": lambda a, i, o: avg_pool(a, i, avg_windows(a), True),
    "adaptive_avg_pool2d": lambda a, i, o: avg_pool(a, i, adaptive_avg_windows(a), False),
    "adaptive_avg_pool2d_backward": lambda a, i, o: avg_pool(a, i, adaptive_avg_windows(a), True),
    "upsample_bilinear2d": lambda a, i, o: upsample(a, i, False),
    "upsample_bilinear2d_backward": lambda a, i, o: upsample(a, i, True),
    "upsample_nearest": lambda a, i, o: upsample_nearest(a, i, False),
    "upsample_nearest_backward": lambda a, i, o: upsample_nearest(a, i, True),
    "group_norm": lambda a, i, o: group_norm(a, i, o, False),
    "group_norm_backward": lambda a, i, o: group_norm(a, i, o, True),
    "baddbmm": lambda a, i, o: baddbmm(a, i, o, False),
    "baddbmm_backward": lambda a, i, o: {
        k: v for k, v in baddbmm(a, i, o, True).items() if k in ("da", "db", "dc")},
    "rnn": lambda a, i, o: rnn(a, i, o, False),
    "batch_norm_eval": batch_norm_eval,
    "feature_dropout": lambda a, i, o: {"y": ops.feature_dropout(
        i["x"].reshape(a["batch"], a["channels"], a["spatial"]), np.zeros(1, F), a["p"],
        a["state"] & (2 ** 64 - 1), a["call"] & (2 ** 64 - 1))["y"]},
    "feature_dropout_backward": lambda a, i, o: {"dx": ops.feature_dropout(
        np.zeros((a["batch"], a["channels"], a["spatial"]), F),
        i["dy"].reshape(a["batch"], a["channels"], a["spatial"]), a["p"],
        a["state"] & (2 ** 64 - 1), a["call"] & (2 ** 64 - 1))["dx"]},
    "bernoulli": lambda a, i, o: ops.bernoulli((a["n"],), a["p"], a["state"] & (2 ** 64 - 1),
                                               a["call"] & (2 ** 64 - 1)),
    "uniform": lambda a, i, o: ops.uniform((a["n"],), a["state"] & (2 ** 64 - 1),
                                           a["call"] & (2 ** 64 - 1)),
    "normal": lambda a, i, o: ops.normal((a["n"],), a["state"] & (2 ** 64 - 1),
                                         a["call"] & (2 ** 64 - 1)),
    "randint": lambda a, i, o: ops.randint(a["n"], a["low"], a["high"], a["state"] & (2 ** 64 - 1),
                                           a["call"] & (2 ** 64 - 1)),
    "bernoulli_of": lambda a, i, o: ops.bernoulli_of(i["p"], a["state"] & (2 ** 64 - 1),
                                                     a["call"] & (2 ** 64 - 1)),
    "nll_loss": lambda a, i, o: {"loss": np.array([ops.nll_loss(
        i["logp"].reshape(a["rows"], a["classes"]), i["targets"], a["ignore_index"],
        F(1.0))["loss"]], F)},
    "nll_loss_backward": lambda a, i, o: {"dlogp": ops.nll_loss(
        np.zeros((a["rows"], a["classes"]), F), i["targets"], a["ignore_index"],
        a["dloss"])["dlogp"]},
    "cross_entropy_smoothed": lambda a, i, o: smoothed(a, i, o, False),
    "cross_entropy_smoothed_backward": lambda a, i, o: smoothed(a, i, o, True),
    "bce_with_logits": lambda a, i, o: {
        "loss": np.array([ops.bce_logits(i["x"], i["target"], F(1.0))["loss"]], F)},
    "bce_with_logits_backward": lambda a, i, o: {
        "dx": ops.bce_logits(i["x"], i["target"], a["dloss"])["dx"]},
    "reduce": lambda a, i, o: reduction(a, i, o, False),
    "reduce_backward": lambda a, i, o: reduction(a, i, o, True),
    "rnn_backward": lambda a, i, o: rnn(a, i, o, True),
}


ACTIVATIONS = ("sigmoid", "tanh", "silu", "hardtanh", "hardsigmoid", "hardswish", "leaky_relu",
               "elu", "gelu_tanh", "softplus", "selu", "celu", "mish", "log_sigmoid", "hardshrink",
               "softshrink", "threshold", "exp", "log")


def activation(fn, backward):
    """An element-wise activation of "More functions" (portable_ops_ref.py), forward or
    backward; sigmoid's, tanh's and exp's backward read the output, the others' the input."""
    def run(a, i, o):
        params = {k: a[k] for k in ("min_val", "max_val", "slope", "alpha", "beta", "threshold")}
        if not backward:
            return {"y": ops.activation(fn, i["x"], np.zeros_like(i["x"]), **params)["y"]}
        if fn == "sigmoid":
            return {"dx": ops.sigmoid_backward(i["y"], i["dy"])}
        if fn == "tanh":
            return {"dx": ops.tanh_backward(i["y"], i["dy"])}
        if fn == "exp":
            return {"dx": ops.exp_backward(i["y"], i["dy"])}
        return {"dx": ops.activation(fn, i["x"], i["dy"], **params)["dx"]}
    return run


for _fn in ACTIVATIONS:
    OPERATORS[_fn] = activation(_fn, False)
    OPERATORS[_fn + "_backward"] = activation(_fn, True)


def rule(doc):
    if set(doc) != {"evidence", "signature", "signer"}:
        raise Refused("expected an object with evidence, signature and signer")
    e = doc["evidence"]
    if e.get("format") != "veritrain/operator-evidence/v2":
        raise Refused("format: expected \"veritrain/operator-evidence/v2\"")
    header, call, proof = e["header"], e["call"], e["proof"]
    checks = [(bytes.fromhex(doc["signer"]), canonical(e).encode(), doc["signature"], "auditor"),
              (bytes.fromhex(e["provider"]), canonical(header).encode(), e["provider_signature"],
               "provider")]
    signatures = "checked"
    for key, message, signature, whose in checks:
        ok = verify_signature(key, message, bytes.fromhex(signature))
        if ok is None:
            signatures = "not checked (no openssl program)"
        elif not ok:
            raise Refused("the %s's signature does not hold" % whose)
    if proof["calls"] != header["calls"] or proof["index"] != call["index"]:
        raise Refused("the proof is for another call or trace than the signed header's")
    path = [bytes.fromhex(h) for h in proof["path"]]
    if root_from_path(leaf(call), proof["index"], 0, proof["calls"], path).hex() != \
            header["calls_root"] or path:
        raise Refused("call %d is not in the provider's signed trace" % call["index"])
    inputs, in_given = operand_arrays(e["inputs"], call["inputs"], "input")
    claimed, out_given = operand_arrays(e["outputs"], call["outputs"], "output")
    if call["op"] not in OPERATORS:
        raise NotCovered("operator " + call["op"])
    params = {p["name"]: p.get("int", p.get("f32")) for p in call["params"]}
    if "disputed" in e:
        ruling = rule_one_value(e, call, params, inputs, in_given, claimed, out_given)
        ruling["signatures"] = signatures
        return ruling
    if any(g is not None for g in list(in_given.values()) + list(out_given.values())):
        raise Refused("operands are given in part, but no disputed value is named")
    counts = {h["name"]: h["count"] for h in call["outputs"]}
    with np.errstate(all="ignore"):
        mine = OPERATORS[call["op"]](params, inputs, counts)
    differing = []
    for h in call["outputs"]:
        theirs = claimed[h["name"]]
        ours = mine.get(h["name"]) if h["count"] > 0 else None
        if theirs is None and ours is None:
            continue
        if theirs is None or ours is None:
            differing.append("%s (absent on one side)" % h["name"])
            continue
        a = np.ascontiguousarray(ours, dtype=theirs.dtype).reshape(-1)
        if a.size != theirs.size:
            differing.append("%s (%d values, not %d)" % (h["name"], theirs.size, a.size))
            continue
        n = int(np.count_nonzero(np.any(a.view(np.uint8).reshape(a.size, -1) !=
                                        theirs.view(np.uint8).reshape(a.size, -1), axis=1)))
        if n:
            differing.append("%s (%d of %d values)" % (h["name"], n, a.size))
    return {"ruling": "provider_wrong" if differing else "provider_correct",
            "operator": call["op"], "call": call["index"], "epoch": header["epoch"],
            "step": header["step"], "differing_outputs": differing, "signatures": signatures}


def rule_file(path):
    """Rules on one evidence file: prints the ruling (or why there is none) and returns its
    exit status."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        ruling = rule(doc)
    except NotCovered as e:
        print("referee_ref.py: %s: not covered: %s" % (path, e), file=sys.stderr)
        return NOT_COVERED
    except (Refused, KeyError, TypeError, ValueError, OSError) as e:
        print("referee_ref.py: %s: no ruling: %s: %s" % (path, type(e).__name__, e),
              file=sys.stderr)
        return BAD
    print(json.dumps(ruling))
    return 0 if ruling["ruling"] == "provider_correct" else WRONG


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return BAD
    return max(rule_file(path) for path in argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
