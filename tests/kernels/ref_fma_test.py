#!/usr/bin/env python3
"""portable_ref.py's fma (float64 operations, rounded to odd, then to binary32) against the C
library's fmaf, which the kernels' scalar path calls and the FMA instructions equal: random
operands, cancellations, exact ties, sums a float64 step from a binary32 midpoint (where rounding
twice goes wrong: the control counts those), zeros, subnormals, infinities and NaN.
Usage: ref_fma_test.py SCRIPTS_DIR"""
import ctypes
import importlib.util
import os
import sys

import numpy as np

spec = importlib.util.spec_from_file_location(
    "portable_ref", os.path.join(sys.argv[1], "portable_ref.py"))
ref = importlib.util.module_from_spec(spec)
sys.path.insert(0, sys.argv[1])
spec.loader.exec_module(ref)

libm = ctypes.CDLL("libm.so.6")
libm.fmaf.restype = ctypes.c_float
libm.fmaf.argtypes = [ctypes.c_float] * 3
F, N = np.float32, 100000
rng = np.random.default_rng(7)


def c_fma(a, b, c):
    return np.array([libm.fmaf(float(x), float(y), float(z)) for x, y, z in zip(a, b, c)], F)


def same(x, y):
    return (x.view(np.uint32) == y.view(np.uint32)) | (np.isnan(x) & np.isnan(y))


failed = False


def check(name, a, b, c):
    global failed
    a, b, c = (np.asarray(v, F) for v in (a, b, c))
    bad = ~same(ref.fma(a, b, c), c_fma(a, b, c))
    print(f"{name}: {bad.sum()} of {a.size} differ")
    failed |= bool(bad.any())


a, b = rng.standard_normal(N).astype(F), rng.standard_normal(N).astype(F)
check("random", a, b, rng.standard_normal(N))
check("cancellation", a, b, -(a.astype(np.float64) * b))
check("small product, large sum", a * F(2**-5), b, rng.standard_normal(N) * 2**20)
ints = rng.integers(1 << 23, 1 << 24, N).astype(F)  # ulp 1
halves = ((rng.integers(-64, 64, N) * 2 + 1) * 2.0**-7).astype(F)  # × 64: odd halves
check("exact ties", halves, np.full(N, 64.0), ints)
# c = 1 + k·2^-23 and a·b ≈ 2^-24: sums within a float64 step of a binary32 midpoint.
c = (1 + rng.integers(0, 1 << 22, N) * 2.0**-23).astype(F)
a = (2.0**-24 * (1 + rng.integers(-2**10, 2**10, N) * 2.0**-23)).astype(F)
b = (1 + rng.integers(-2**10, 2**10, N) * 2.0**-23).astype(F)
twice = (a.astype(np.float64) * b + c).astype(F)
traps = int((~same(twice, c_fma(a, b, c))).sum())
print(f"control: rounding the float64 sum twice gets {traps} of these wrong")
failed |= traps == 0  # the traps must be real, or the next line proves nothing
check("double-rounding traps", a, b, c)
special = np.array([1e-45, -1e-45, 1e-40, 3e-39, 0.0, -0.0, np.inf, -np.inf, np.nan, 3.4e38,
                    -3.4e38, 1e-20, 1.0, -1.0], F)
x, y, z = np.meshgrid(special, special, special)
check("specials", x.ravel(), y.ravel(), z.ravel())
sys.exit(1 if failed else 0)
