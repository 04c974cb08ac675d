#!/usr/bin/env python3
"""How far can a before/after pair of snapshots shrink? Order-0 entropy per byte plane.

    reference/pair_entropy.py BEFORE.safetensors AFTER.safetensors

For every fp32 tensor (grouped as weights, exp_avg, exp_avg_sq, momentum) it prints the bits
per value of the four byte planes of the `planes` layout (exponent byte first, docs/container.md)
for the "after" state alone, and for the zigzag integer difference after - before that the
`delta` codec codes (docs/container.md). A plane coder that models each byte without context
(what zstd's entropy stage does when, as in float mantissas, there are no repeats to match)
cannot beat these figures, so the last line is the best pair ratio such a coder can reach:
2 x 32 bits over (best single + best delta) bits per value. Standard library only.
"""

import array
import collections
import json
import math
import struct
import sys


def load(path):
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    tensors = {}
    for name, meta in header.items():
        if name == "__metadata__" or meta["dtype"] != "F32":
            continue
        begin, end = meta["data_offsets"]
        words = array.array("I", data[8 + n + begin:8 + n + end])
        if sys.byteorder != "little":
            words.byteswap()
        tensors[name] = words
    return tensors


def entropy(counts, total):
    return -sum(c / total * math.log2(c / total) for c in counts.values() if c)


def plane_bytes(word):
    # The planes layout: exponent, then sign with the top 7 mantissa bits, then the rest.
    return ((word >> 23) & 0xFF, (word >> 31) << 7 | (word >> 16) & 0x7F, (word >> 8) & 0xFF, word & 0xFF)


def group_of(name):
    for kind in ("exp_avg_sq", "exp_avg", "momentum"):
        if kind in name:
            return kind
    return "weights"


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    before, after = load(sys.argv[1]), load(sys.argv[2])
    if before.keys() != after.keys():
        sys.exit("the two snapshots do not hold the same fp32 tensors")
    bits = collections.defaultdict(lambda: [0, 0.0, 0.0])  # group -> [values, single bits, delta bits]
    for name, now in after.items():
        old = before[name]
        if len(old) != len(now):
            sys.exit(f"tensor {name}: {len(old)} values before, {len(now)} after")
        if len(now) < 4096:  # too few values for a meaningful per-tensor histogram
            continue
        single = [collections.Counter() for _ in range(4)]
        delta = [collections.Counter() for _ in range(4)]
        for x, y in zip(now, old):
            d = (x - y) & 0xFFFFFFFF
            z = ((d << 1) ^ (0xFFFFFFFF if d >> 31 else 0)) & 0xFFFFFFFF  # zigzag of the signed difference
            for plane, (a, b) in enumerate(zip(plane_bytes(x), (z >> 24, z >> 16 & 0xFF, z >> 8 & 0xFF, z & 0xFF))):
                single[plane][a] += 1
                delta[plane][b] += 1
        n = len(now)
        entry = bits[group_of(name)]
        entry[0] += n
        entry[1] += n * sum(entropy(c, n) for c in single)
        entry[2] += n * sum(entropy(c, n) for c in delta)
    if not bits:
        sys.exit("no fp32 tensor of 4096 values or more")
    total_values = total_single = total_pair = 0.0
    print(f"{'group':12s} {'values':>9s} {'after alone':>12s} {'delta':>7s}   (bits per value)")
    for group, (n, single, delta) in sorted(bits.items()):
        print(f"{group:12s} {n:9d} {single / n:12.2f} {delta / n:7.2f}")
        total_values += n
        total_single += single
        total_pair += single + min(single, delta)  # the codec keeps the smaller of the two per section
    print(f"best single ratio {32 * total_values / total_single:.3f}x, "
          f"best pair ratio {64 * total_values / total_pair:.3f}x (order-0 per plane)")


if __name__ == "__main__":
    main()
