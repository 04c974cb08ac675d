"""training/script/decompositions.py run on numpy: the same functions, read from that file,
executed over a `torch` whose operators are docs/portable.md's (portable_ops_ref.py's kernels and
IEEE binary32 element-wise operations), so that the definitions veritrain compiles and the
arithmetic the docs state cannot part. Forward values only: a decomposition's backward is its
parts' backwards, which portable_ops_ref.py replays kernel by kernel.

Usage: decompositions_ref.py CASES.json
CASES.json (tests/training/decompositions_test.cpp writes it): {"cases": [{"function": name,
"args": [arg, ...], "outputs": [tensor, ...]}]}, a tensor {"dtype": "f32"|"i64"|"bool",
"shape": [...], "data": [...]} (f32 as its uint32 bit patterns), any other arg a number, bool,
string, list or null. Prints each case that differs (its first differing value, as bits) and
exits 1 if any does, else 0.
"""
import json
import math
import os
import sys
import typing

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import portable_ops_ref as ops  # noqa: E402

F = np.float32
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = os.path.join(ROOT, "training", "script", "decompositions.py")


def scalar_for(a, v):
    """A Python number as LibTorch applies it to a tensor: in the tensor's type (binary32 for
    floating tensors, as its CPU kernels convert a Scalar), and a float makes an integer tensor
    binary32."""
    if isinstance(v, bool):
        return np.bool_(v)
    if a.dtype == F or isinstance(v, float):
        return F(v)
    return np.int64(v)


def array_of(v, like=None):
    if isinstance(v, T):
        return v.a
    if like is not None:
        return scalar_for(like, v)
    return F(v) if isinstance(v, float) else v


class T:
    """A tensor: a numpy array with the methods and operators decompositions.py calls."""

    def __init__(self, a):
        self.a = np.asarray(a)

    def _bin(self, other, fn, swap=False):
        b = array_of(other, self.a)
        x, y = (b, self.a) if swap else (self.a, b)
        out = fn(x, y)
        if out.dtype == np.float64:
            out = out.astype(F)
        return T(out)

    def __add__(self, o): return self._bin(o, np.add)
    def __radd__(self, o): return self._bin(o, np.add, True)
    def __sub__(self, o): return self._bin(o, np.subtract)
    def __rsub__(self, o): return self._bin(o, np.subtract, True)
    def __mul__(self, o): return self._bin(o, np.multiply)
    def __rmul__(self, o): return self._bin(o, np.multiply, True)
    def __truediv__(self, o): return self._bin(o, np.divide)
    def __neg__(self): return T(-self.a)
    def __lt__(self, o): return self._bin(o, np.less)
    def __le__(self, o): return self._bin(o, np.less_equal)
    def __gt__(self, o): return self._bin(o, np.greater)
    def __ge__(self, o): return self._bin(o, np.greater_equal)
    def __eq__(self, o): return self._bin(o, np.equal)
    def __ne__(self, o): return self._bin(o, np.not_equal)
    __hash__ = None

    def size(self, d=None):
        return list(self.a.shape) if d is None else self.a.shape[d]

    def dim(self):
        return self.a.ndim

    def unsqueeze(self, d):
        return T(np.expand_dims(self.a, d))

    def squeeze(self, d):
        return T(np.squeeze(self.a, d)) if self.a.shape[d] == 1 else self

    def narrow(self, d, start, length):
        return T(np.take(self.a, range(start, start + length), axis=d))

    def flip(self, dims):
        return T(np.flip(self.a, dims))

    def repeat(self, reps):
        return T(np.tile(self.a, reps))

    def reshape(self, shape):
        return T(self.a.reshape(shape))

    def transpose(self, a, b):
        return T(np.swapaxes(self.a, a, b))


def _dims(x, dims):
    return list(range(x.a.ndim)) if dims is None or len(dims) == 0 else list(dims)


def _reduce(fn, x, dims=None, keepdim=False):
    _, keep_shape, _ = ops._reduced(x.a, _dims(x, dims), keepdim)
    return T(ops.reduce(fn, x.a, np.zeros(keep_shape, F), _dims(x, dims), keepdim)["y"])


def _where(c, a, b):
    like = a.a if isinstance(a, T) else (b.a if isinstance(b, T) else np.zeros(1, F))
    return T(np.where(c.a, array_of(a, like), array_of(b, like)))


def _pool_dy(x, out_h, out_w):
    return np.zeros(x.shape[:2] + (out_h, out_w), F)


def _max_pool2d(x, kernel, stride, padding, dilation, ceil_mode):
    h, w = x.a.shape[2:]
    oh = ops.pool_out_size(h, kernel[0], stride[0], padding[0], dilation[0], ceil_mode)
    ow = ops.pool_out_size(w, kernel[1], stride[1], padding[1], dilation[1], ceil_mode)
    return ops.max_pool2d(x.a, _pool_dy(x.a, oh, ow), kernel, stride, padding, dilation, ceil_mode)


def _avg_pool2d(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor=None):
    h, w = x.a.shape[2:]
    oh = ops.pool_out_size(h, kernel[0], stride[0], padding[0], 1, ceil_mode)
    ow = ops.pool_out_size(w, kernel[1], stride[1], padding[1], 1, ceil_mode)
    return T(ops.avg_pool2d(x.a, _pool_dy(x.a, oh, ow), kernel, stride, padding, ceil_mode,
                            count_include_pad, divisor)["y"])


def _constant_pad_nd(x, pad, value):
    widths = [(0, 0)] * x.a.ndim
    for i in range(len(pad) // 2):
        widths[x.a.ndim - 1 - i] = (pad[2 * i], pad[2 * i + 1])
    return T(np.pad(x.a, widths, constant_values=scalar_for(x.a, value)))


class Torch:
    """The `torch` decompositions.py sees: each name an operator of docs/portable.md."""
    mean = staticmethod(lambda x, dims=None, keepdim=False: _reduce("mean", x, dims, keepdim))
    sum = staticmethod(lambda x, dims=None, keepdim=False: _reduce("sum", x, dims, keepdim))
    abs = staticmethod(lambda x: T(np.abs(x.a)))
    where = staticmethod(_where)
    clamp = staticmethod(lambda x, min: T(np.maximum(x.a, scalar_for(x.a, min))))
    clamp_min = staticmethod(lambda x, v: T(np.maximum(x.a, scalar_for(x.a, v))))
    log = staticmethod(lambda x: T(ops.vt_log(x.a)))
    exp = staticmethod(lambda x: T(ops.vt_exp(x.a)))
    sqrt = staticmethod(lambda x: T(np.sqrt(x.a)))
    zeros_like = staticmethod(lambda x: T(np.zeros_like(x.a)))
    ones_like = staticmethod(lambda x: T(np.ones_like(x.a)))
    arange = staticmethod(lambda n: T(np.arange(n, dtype=np.int64)))
    embedding = staticmethod(lambda table, ids: T(table.a[ids.a]))
    minimum = staticmethod(lambda a, b: T(np.minimum(a.a, b.a)))
    cat = staticmethod(lambda parts, d: T(np.concatenate([p.a for p in parts], d)))
    constant_pad_nd = staticmethod(_constant_pad_nd)
    max_pool2d = staticmethod(lambda *a: T(_max_pool2d(*a)["y"]))
    avg_pool2d = staticmethod(_avg_pool2d)

    @staticmethod
    def max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode):
        # The values (the indices are the kernel's and portable_ops_ref.py's test).
        out = _max_pool2d(x, kernel, stride, padding, dilation, ceil_mode)
        return T(out["y"]), T(np.zeros(out["y"].shape, np.int64))

    @staticmethod
    def adaptive_avg_pool2d(x, output):
        dy = _pool_dy(x.a, output[0], output[1])
        return T(ops.adaptive_avg_pool2d(x.a, dy, output)["y"])

    @staticmethod
    def group_norm(x, groups, w, b, eps, cudnn_enabled):
        channels = x.a.shape[1]
        w = np.ones(channels, F) if w is None else w.a
        b = np.zeros(channels, F) if b is None else b.a
        return T(ops.group_norm(x.a, w, b, np.zeros_like(x.a), groups, eps)["y"])


def functions():
    """decompositions.py's functions, its imports left out as the C++ build leaves them."""
    lines = [("" if l.startswith(("import ", "from ")) else l)
             for l in open(SOURCE, encoding="utf-8").read().splitlines()]
    scope = {"torch": Torch, "Tensor": T, "List": typing.List, "Optional": typing.Optional,
             "math": math}
    exec(compile("\n".join(lines) + "\n", SOURCE, "exec"), scope)
    return scope


def decode(v):
    if isinstance(v, dict) and "dtype" in v:
        if v["dtype"] == "f32":
            a = np.array(v["data"], dtype=np.uint32).view(F)
        elif v["dtype"] == "bool":
            a = np.array(v["data"], dtype=bool)
        else:
            a = np.array(v["data"], dtype=np.int64)
        return T(a.reshape(v["shape"]))
    return v


def bits(a):
    a = np.asarray(a)
    return a.astype(F).view(np.uint32) if a.dtype == F else a.astype(np.int64)


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    cases = json.load(open(sys.argv[1]))["cases"]
    scope = functions()
    failed = 0
    for case in cases:
        out = scope[case["function"]](*[decode(a) for a in case["args"]])
        got = out if isinstance(out, tuple) else (out,)
        for k, (mine, theirs) in enumerate(zip(got, case["outputs"])):
            want = decode(theirs).a
            have = np.asarray(mine.a)
            if have.shape != want.shape:
                print("%s output %d: shape %s, veritrain's %s" % (case["name"], k, have.shape,
                                                                  want.shape))
                failed += 1
                continue
            diff = np.flatnonzero(bits(have).ravel() != bits(want).ravel())
            if diff.size:
                i = diff[0]
                print("%s output %d: %d of %d values differ; first at %d: %r (0x%08x), "
                      "veritrain's %r (0x%08x)" % (
                          case["name"], k, diff.size, want.size, i, have.ravel()[i],
                          bits(have).ravel()[i], want.ravel()[i], bits(want).ravel()[i]))
                failed += 1
    print("%d of %d cases agree" % (len(cases) - failed, len(cases)))
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
