"""The reference replayer's readers of a requestor's own data, written from docs/datasets.md.

A `tensors` dataset: safetensors shards, each holding `inputs` and `targets` with the examples
along the first dimension, concatenated in the bytewise order of their file names. Every file is
checked against its SHA-256 pin before it is read. Rows are copied out of a read-only memory map
per batch, so a dataset larger than memory costs only the pages its batches touch. Shares no code
with veritrain (and none with replay_ref.py's PRNG: the caller passes the held-out rows).
"""
import hashlib
import json
import mmap
import os
import struct

import numpy as np
import torch

# Stored dtype -> numpy dtype of its bytes (little-endian). BF16 is read as its 16 bits and
# widened exactly by torch; every other dtype converts to F32 as a C cast would (docs/datasets.md,
# "What the model receives": converted, not rescaled).
INPUT_DTYPES = {"F32": "<f4", "BF16": "<i2", "F16": "<f2", "U8": "u1", "I8": "i1", "I16": "<i2",
                "I32": "<i4", "I64": "<i8"}
TARGET_DTYPES = {"I64": "<i8", "F32": "<f4"}
MAX_HEADER = 100 << 20


class BadData(Exception):
    """The data is not what the task pins or what docs/datasets.md allows (exit 2)."""


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def pinned_paths(folder, files):
    """The pinned files in bytewise name order, each checked against its SHA-256."""
    if not files:
        raise BadData("dataset.files: pins no files")
    out = []
    for name in sorted(files, key=lambda s: s.encode()):
        path = os.path.join(folder, name)
        if not os.path.isfile(path):
            raise BadData('dataset.files: file "%s" is missing (looked for %s)' % (name, path))
        actual = sha256_file(path)
        if actual != files[name]:
            raise BadData("%s: SHA-256 is %s, dataset.files pins %s" % (path, actual, files[name]))
        out.append(path)
    return out


class Shard:
    def __init__(self, path):
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            self.map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        if size < 8:
            raise BadData("%s: %d bytes, shorter than a safetensors header length" % (path, size))
        (n,) = struct.unpack_from("<Q", self.map, 0)
        if n > min(MAX_HEADER, size - 8):
            raise BadData("%s: header length %d exceeds the file" % (path, n))
        header = json.loads(bytes(self.map[8:8 + n]))
        begin = 8 + n
        self.columns = {}
        for name, table in (("inputs", INPUT_DTYPES), ("targets", TARGET_DTYPES)):
            info = header.get(name)
            if info is None:
                raise BadData('%s: a tensors shard needs tensors named "inputs" and "targets"' % path)
            if info["dtype"] not in table:
                raise BadData("%s: %s have dtype %s" % (path, name, info["dtype"]))
            shape = [int(d) for d in info["shape"]]
            lo, hi = (int(o) for o in info["data_offsets"])
            dtype = np.dtype(table[info["dtype"]])
            if not shape or min(shape) < 0 or not 0 <= lo <= hi <= size - begin or \
                    hi - lo != int(np.prod(shape)) * dtype.itemsize:
                raise BadData("%s: %s %s at %s does not fit the file" % (path, name, shape, info["data_offsets"]))
            array = np.frombuffer(self.map, dtype=dtype, count=int(np.prod(shape)), offset=begin + lo)
            self.columns[name] = (info["dtype"], array.reshape(shape))
        self.count = self.columns["inputs"][1].shape[0]
        if self.columns["targets"][1].shape[0] != self.count:
            raise BadData("%s: inputs hold %d examples, targets %d" % (path, self.count,
                                                                     self.columns["targets"][1].shape[0]))

    def kind(self):
        return tuple((d, a.shape[1:]) for d, a in self.columns.values())


class TensorsDataset:
    """Rows 0..N-1 over the shards in name order; `keep(rows)` renumbers a subset (ascending)."""

    def __init__(self, paths):
        self.shards = [Shard(p) for p in paths]
        for path, s in zip(paths[1:], self.shards[1:]):
            if s.kind() != self.shards[0].kind():
                raise BadData("%s: shard holds %s per example; the first shard holds %s" %
                              (path, s.kind(), self.shards[0].kind()))
        self.starts = np.cumsum([0] + [s.count for s in self.shards])
        self.rows = None
        if self.starts[-1] == 0:
            raise BadData("dataset: the train split holds no examples")

    def __len__(self):
        return int(self.starts[-1]) if self.rows is None else len(self.rows)

    def keep(self, rows):
        self.rows = np.asarray(rows, dtype=np.int64)

    def input_dtype(self):
        return self.shards[0].columns["inputs"][0]

    def target_dtype(self):
        return self.shards[0].columns["targets"][0]

    def features(self):
        return int(np.prod(self.shards[0].columns["inputs"][1].shape[1:]))

    def batch(self, indices):
        """(inputs as F32, targets as stored) of example `indices`, in that order."""
        rows = np.asarray(indices, dtype=np.int64)
        if self.rows is not None:
            rows = self.rows[rows]
        which = np.searchsorted(self.starts, rows, side="right") - 1
        out = []
        for name in ("inputs", "targets"):
            first = self.shards[0].columns[name][1]
            gathered = np.empty((len(rows),) + first.shape[1:], dtype=first.dtype)
            for k, shard in enumerate(self.shards):
                mask = which == k
                if mask.any():
                    gathered[mask] = shard.columns[name][1][rows[mask] - self.starts[k]]
            out.append(torch.from_numpy(gathered))
        x, y = out
        if self.input_dtype() == "BF16":
            x = x.view(torch.bfloat16)
        return x.to(torch.float32), y


def open_tensors(task, data_dir):
    paths = pinned_paths(data_dir, task["dataset"]["files"])
    try:
        return TensorsDataset(paths)
    except (KeyError, TypeError, ValueError, AttributeError) as e:  # a header not shaped as docs/datasets.md says
        raise BadData("dataset: a shard's safetensors header is malformed (%s: %s)" % (type(e).__name__, e))
