#!/usr/bin/python3
"""Writes sklearn's digits (1797 real 8x8 handwritten digits) as a veritrain `tensors` dataset.

    make_digits.py OUT_DIR [--eval-fraction 0.2] [--seed 0] [--dtype f32|u8] [--shards N] [--image]

OUT_DIR gets digits-train.safetensors (or digits-train-0.safetensors .. -N-1 with --shards N,
the same rows cut into consecutive shards) and digits-eval.safetensors (docs/datasets.md): `inputs`
[N, 64] (pixels scaled to [0, 1] as F32, or the raw 0..16 values as U8) and `targets` [N] I64
class ids (--image: inputs [N, 3, 8, 8], the digit in each of three channels, the shape the
zoo's cnn takes). The split is a seeded shuffle of the examples, so the same arguments give the same
bytes. Prints one JSON object: file name -> SHA-256, what a task pins in dataset.files and
dataset.eval_files.
"""
import argparse
import hashlib
import json
import os
import struct
import sys

import numpy as np
from sklearn.datasets import load_digits


def safetensors_bytes(tensors):
    """The safetensors layout: u64le header length, JSON header, data in the given order."""
    header, blobs, offset = {}, [], 0
    for name, (dtype, array) in tensors.items():
        blob = np.ascontiguousarray(array).astype(array.dtype.newbyteorder("<"), copy=False).tobytes()
        header[name] = {"dtype": dtype, "shape": list(array.shape), "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir")
    ap.add_argument("--eval-fraction", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--dtype", choices=["f32", "u8"], default="f32")
    ap.add_argument("--shards", type=int, default=1)
    ap.add_argument("--image", action="store_true", help="inputs [N, 3, 8, 8] for the cnn")
    args = ap.parse_args()
    if not 0.0 < args.eval_fraction < 1.0:
        sys.exit("make_digits.py: --eval-fraction must lie in (0, 1)")
    digits = load_digits()
    x, y = digits.data, digits.target.astype(np.int64)
    order = np.random.RandomState(args.seed).permutation(len(y))
    n_eval = int(round(len(y) * args.eval_fraction))
    splits = {"digits-eval.safetensors": order[:n_eval]}
    train = order[n_eval:]
    if args.shards == 1:
        splits["digits-train.safetensors"] = train
    else:
        for i, rows in enumerate(np.array_split(train, args.shards)):
            splits["digits-train-%d.safetensors" % i] = rows
    os.makedirs(args.out_dir, exist_ok=True)
    pins = {}
    for name, rows in splits.items():
        inputs = (x[rows] / 16.0).astype(np.float32) if args.dtype == "f32" else x[rows].astype(np.uint8)
        if args.image:
            inputs = np.repeat(inputs.reshape(len(rows), 1, 8, 8), 3, axis=1)
        data = safetensors_bytes({"inputs": ("F32" if args.dtype == "f32" else "U8", inputs),
                                  "targets": ("I64", y[rows])})
        with open(os.path.join(args.out_dir, name), "wb") as f:
            f.write(data)
        pins[name] = hashlib.sha256(data).hexdigest()
    print(json.dumps(pins, sort_keys=True))


if __name__ == "__main__":
    main()
