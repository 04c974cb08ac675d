#!/usr/bin/env python3
"""Independent reference for docs/fingerprint.md, Python 3 standard library only.

    fingerprint_ref.py SNAPSHOT.safetensors TASK_ID_HEX EPOCH K
    fingerprint_ref.py --root FILE...       (one Merkle root per line)

prints {"fingerprint": {...}, "root": "<hex>"} as canonical JSON (sorted keys, no whitespace),
the same bytes that vt::canonical_json gives for the C++ result. Written from the document,
not from the C++ code, so that the two agreeing means the document is complete.
"""
import hashlib
import json
import struct
import sys

CHUNK = 1 << 20
FLOAT_SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}
ALL_SIZES = dict(FLOAT_SIZES, I64=8, I32=4, I16=2, I8=1, U8=1, BOOL=1)
MIN_PER_TENSOR = 1


def sha256(*parts):
    h = hashlib.sha256()
    for p in parts:
        h.update(p)
    return h.digest()


def u64(v):
    return struct.pack("<Q", v)


def merkle_root(data):
    if not data:
        return sha256(b"")
    level = [sha256(b"\x00", data[i:i + CHUNK]) for i in range(0, len(data), CHUNK)]
    while len(level) > 1:
        nxt = [sha256(b"\x01", level[i], level[i + 1]) for i in range(0, len(level) - 1, 2)]
        if len(level) % 2:
            nxt.append(level[-1])
        level = nxt
    return level[0]


def commitment_seed(task_id, epoch, root):
    return sha256(b"veritrain/fingerprint/v1", task_id, u64(epoch), root)


class Prf:
    def __init__(self, seed, name):
        raw = name.encode("utf-8")
        self.prefix = seed + u64(len(raw)) + raw
        self.counter = 0
        self.words = []

    def next_u64(self):
        if not self.words:
            block = sha256(self.prefix, u64(self.counter))
            self.counter += 1
            self.words = list(struct.unpack("<4Q", block))
        return self.words.pop(0)

    def uniform(self, bound):
        limit = (1 << 64) - ((1 << 64) % bound)
        while True:
            w = self.next_u64()
            if w < limit:
                return w % bound


def positions(prf, numel, count):
    chosen = set()
    for j in range(numel - count, numel):
        t = prf.uniform(j + 1)
        chosen.add(j if t in chosen else t)
    return sorted(chosen)


def plan(seed, tensors, k):
    """tensors: list of (name, dtype, numel) in any order; returns [(name, dtype, numel, idx)]."""
    eligible = sorted((t for t in tensors if t[1] in FLOAT_SIZES and t[2] > 0),
                      key=lambda t: t[0].encode("utf-8"))
    total = sum(t[2] for t in eligible)
    if k < 1 or not eligible or k > total or k < MIN_PER_TENSOR * len(eligible):
        raise SystemExit("k = %d cannot be planned over %d elements in %d tensors" % (k, total, len(eligible)))
    counts = [min(t[2], MIN_PER_TENSOR) for t in eligible]
    caps = [t[2] - c for t, c in zip(eligible, counts)]
    rest, capacity = k - sum(counts), sum(caps)
    if rest:
        rems = []
        for i, c in enumerate(caps):
            share, rem = divmod(rest * c, capacity)
            counts[i] += share
            rems.append(rem)
        left = k - sum(counts)
        for i in sorted(range(len(eligible)), key=lambda i: (-rems[i], i))[:left]:
            counts[i] += 1
    return [(t[0], t[1], t[2], positions(Prf(seed, t[0]), t[2], c)) for t, c in zip(eligible, counts)]


def parse_safetensors(data):
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    start = 8 + n
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        numel = 1
        for d in info["shape"]:
            numel *= d
        if info["dtype"] not in ALL_SIZES:
            raise SystemExit("tensor %r: unsupported dtype %s" % (name, info["dtype"]))
        begin, end = info["data_offsets"]
        tensors[name] = (info["dtype"], numel, data[start + begin:start + end])
    return tensors


def fingerprint(data, task_id, epoch, k):
    root = merkle_root(data)
    seed = commitment_seed(task_id, epoch, root)
    tensors = parse_safetensors(data)
    out = []
    for name, dtype, numel, idx in plan(seed, [(n, t[0], t[1]) for n, t in tensors.items()], k):
        size, raw = FLOAT_SIZES[dtype], tensors[name][2]
        values = b"".join(raw[i * size:(i + 1) * size] for i in idx)
        out.append({"dtype": dtype, "indices": idx, "name": name, "numel": numel, "values": values.hex()})
    fp = {"seed": seed.hex(), "tensors": out, "version": 1}
    return {"fingerprint": fp, "root": root.hex()}


def main(argv):
    if len(argv) >= 3 and argv[1] == "--root":
        for path in argv[2:]:
            with open(path, "rb") as f:
                print(merkle_root(f.read()).hex())
        return
    if len(argv) != 5:
        raise SystemExit(__doc__)
    with open(argv[1], "rb") as f:
        data = f.read()
    task_id = bytes.fromhex(argv[2])
    if len(task_id) != 32:
        raise SystemExit("task_id must be 64 hex digits")
    result = fingerprint(data, task_id, int(argv[3]), int(argv[4]))
    print(json.dumps(result, sort_keys=True, separators=(",", ":"), ensure_ascii=False))


if __name__ == "__main__":
    main(sys.argv)
