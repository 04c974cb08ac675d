"""What both reference replayers share, written from docs/training.md: the project's PRNG
(SplitMix64), the synthetic datasets, the data order and the learning-rate schedule. Plain Python
and numpy, no torch: reference/portable_ref.py replays portable epochs with numpy alone.
"""
import json
import os
import struct

import numpy as np

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
STREAM_DATA, STREAM_ORDER, STREAM_HELD_OUT, STREAM_AUGMENT = 1, 2, 4, 7  # docs/training.md, "PRNG"
NORMAL_SCALE = np.float32(1.7320508)        # sqrt(12 / 4): the Irwin-Hall sum's variance
IMAGE_TEMPLATE_WEIGHT = np.float32(0.5)
BLOB_CENTER_SCALE = np.float32(2.0)
PI = 3.14159265358979323846
HALF_PI = 1.57079632679489661923
COS_TERMS = 25


# --- PRNG: SplitMix64 --------------------------------------------------------------------
def mix(z):
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


class Prng:
    def __init__(self, seed, a, b=0):
        self.state = mix(mix(seed ^ 0x657269747261696E) ^ a) ^ mix((b + GOLDEN) & MASK)

    def next(self):
        self.state = (self.state + GOLDEN) & MASK
        return mix(self.state)

    def below(self, bound):
        m = self.next() * bound
        if m & MASK < bound:
            threshold = ((1 << 64) - bound) % bound
            while m & MASK < threshold:
                m = self.next() * bound
        return m >> 64

    def next_many(self, n):
        # Output i is mix(state + (i + 1) * GOLDEN): the same draws as n calls of next().
        with np.errstate(over="ignore"):
            z = np.uint64(self.state) + np.arange(1, n + 1, dtype=np.uint64) * np.uint64(GOLDEN)
            z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
            z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        self.state = (self.state + n * GOLDEN) & MASK
        return z ^ (z >> np.uint64(31))

    def uniforms(self, n):
        return (self.next_many(n) >> np.uint64(40)).astype(np.float32) * np.float32(1.0 / 16777216.0)

    def normals(self, n):
        u = self.uniforms(4 * n).reshape(n, 4)
        s = ((u[:, 0] + u[:, 1]) + u[:, 2]) + u[:, 3]
        return (s - np.float32(2.0)) * NORMAL_SCALE

    def permutation(self, n):
        p = list(range(n))
        for i in range(n - 1, 0, -1):
            j = self.below(i + 1)
            p[i], p[j] = p[j], p[i]
        return p


# --- synthetic data ----------------------------------------------------------------------
def blobs(seed, samples, dim, classes):
    rng = Prng(seed, STREAM_DATA, 1)
    centers = (BLOB_CENTER_SCALE * rng.normals(classes * dim)).reshape(classes, dim)
    inputs = np.empty((samples, dim), dtype=np.float32)
    labels = np.empty(samples, dtype=np.int64)
    for i in range(samples):
        labels[i] = rng.below(classes)
        inputs[i] = centers[labels[i]] + rng.normals(dim)
    return inputs, labels


def images(seed, samples, classes):
    pixels = 3 * 32 * 32
    rng = Prng(seed, STREAM_DATA, 2)
    templates = rng.normals(classes * pixels).reshape(classes, pixels)
    inputs = np.empty((samples, pixels), dtype=np.float32)
    labels = np.empty(samples, dtype=np.int64)
    for i in range(samples):
        labels[i] = rng.below(classes)
        inputs[i] = IMAGE_TEMPLATE_WEIGHT * templates[labels[i]] + rng.normals(pixels)
    return inputs.reshape(samples, 3, 32, 32), labels


def volumes(seed, samples, n):
    """conv3d: uniform voxels; the target is their box blur along the last axis."""
    x = Prng(seed, STREAM_DATA, 3).uniforms(samples * n * n * n)
    left = np.zeros_like(x)
    right = np.zeros_like(x)
    edge = np.arange(x.size) % n
    left[1:] = x[:-1]
    right[:-1] = x[1:]
    left[edge == 0] = 0.0
    right[edge == n - 1] = 0.0
    third = np.float32(1.0) / np.float32(3.0)
    targets = ((left + x) + right) * third
    shape = (samples, 1, n, n, n)
    return x.reshape(shape), targets.reshape(shape)


def tokens(seed, samples, vocab, seq_len):
    """gpt: sequences from a sparse Markov chain, four likely successors per token."""
    rng = Prng(seed, STREAM_DATA, 4)
    successors = [rng.below(vocab) for _ in range(vocab * 4)]
    inputs = np.empty((samples, seq_len), dtype=np.int64)
    targets = np.empty((samples, seq_len), dtype=np.int64)
    for i in range(samples):
        t = rng.below(vocab)
        for j in range(seq_len + 1):
            nxt = successors[t * 4 + rng.below(4)] if rng.below(10) < 9 else rng.below(vocab)
            if j < seq_len:
                inputs[i, j] = t
            if j > 0:
                targets[i, j - 1] = t
            t = nxt
    return inputs, targets


def held_out_rows(seed, rows, fraction):
    """docs/datasets.md, "Held-out evaluation": a prefix of a permutation, at least one row held
    out and at least one left; the rows training keeps, ascending."""
    n = min(max(int(float(rows) * fraction), 1), max(1, rows - 1))
    held = set(Prng(seed, STREAM_HELD_OUT).permutation(rows)[:n])
    return [r for r in range(rows) if r not in held]


def epoch_order(seed, epoch, size, needed):
    order, pass_ = [], 0
    while len(order) < needed:
        order += Prng(seed, STREAM_ORDER, (epoch << 20) ^ pass_).permutation(size)[:needed - len(order)]
        pass_ += 1
    return order


# --- augmentation (docs/datasets.md, "Augmentation") ---------------------------------------
def augment_draw(augment, seed, epoch, position):
    """(top, left, flip) of the example at `position` of epoch `epoch`'s order."""
    prng = Prng(seed, STREAM_AUGMENT, ((epoch << 32) ^ position) & MASK)
    pad = augment.get("crop_padding", 0)
    top = left = 0
    if pad > 0:
        top, left = prng.below(2 * pad + 1), prng.below(2 * pad + 1)
    flip = augment.get("flip", False) and prng.below(2) == 1
    return top, left, flip


# --- schedule ----------------------------------------------------------------------------
def power(x, n):
    result = 1.0
    while n > 0:
        if n & 1:
            result *= x
        x *= x
        n >>= 1
    return result


def det_cos(x):
    y = x - HALF_PI
    y2 = y * y
    term = sum_ = y
    for k in range(1, COS_TERMS):
        term *= -y2 / float((2 * k) * (2 * k + 1))
        sum_ += term
    return max(-1.0, min(1.0, -sum_))


def learning_rate(task, step, epoch, total_steps):
    s, base = task["schedule"], task["optimizer"]["lr"]
    lr = base
    if s["name"] == "step":
        lr = base * power(s["gamma"], (epoch - 1) // s["step_size"])
    elif s["name"] == "cosine":
        span = total_steps - 1 if total_steps > 1 else 1
        t = float(min(step, span)) / float(span)
        lr = s["min_lr"] + (base - s["min_lr"]) * 0.5 * (1.0 + det_cos(PI * t))
    if step < s["warmup_steps"]:
        lr *= float(step + 1) / float(s["warmup_steps"])
    return lr


# --- canonical safetensors (docs/snapshot.md), as numpy arrays ---------------------------
SAFETENSORS_DTYPES = {"F32": np.float32, "I64": np.int64, "U8": np.uint8}


def read_safetensors(path):
    """(metadata, {name: array}); a dtype the references never meet is an error naming it."""
    data = open(path, "rb").read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    tensors = {}
    for name, info in header.items():
        if info["dtype"] not in SAFETENSORS_DTYPES:
            raise ValueError("%s: tensor %s has dtype %s, which the reference does not read"
                             % (path, name, info["dtype"]))
        begin, end = info["data_offsets"]
        raw = data[8 + n + begin:8 + n + end]
        tensors[name] = np.frombuffer(raw, dtype=SAFETENSORS_DTYPES[info["dtype"]]).reshape(info["shape"]).copy()
    return meta, tensors


def write_safetensors(path, tensors, meta):
    """The canonical bytes: names in bytewise order, the header padded to 8, written atomically."""
    names = {np.float32: "F32", np.int64: "I64", np.uint8: "U8"}
    header, chunks, offset = {"__metadata__": meta}, [], 0
    for name in sorted(tensors, key=lambda s: s.encode()):
        t = np.asarray(tensors[name])
        t = t if t.flags.c_contiguous else t.copy()  # (ascontiguousarray would make 0-d 1-d)
        raw = t.tobytes()
        header[name] = {"data_offsets": [offset, offset + len(raw)], "dtype": names[t.dtype.type],
                        "shape": list(t.shape)}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def split_jobs(args, usage):
    """The jobs of a reference's command line: [--init] TASK BEFORE AFTER, one after another
    (one interpreter start for all). Exits with `usage` when they do not add up."""
    jobs = []
    while args:
        size = 4 if args[0] == "--init" else 3
        if len(args) < size:
            raise SystemExit(usage)
        jobs.append(args[:size])
        args = args[size:]
    if not jobs:
        raise SystemExit(usage)
    return jobs
