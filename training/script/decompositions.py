# The decompositions of docs/portable.md ("Decompositions"): each function defines one aten
# operator (named as training/script/op_table.cpp names it: the operator, then "__" and its
# overload; `torch.x` is aten::x, the only names TorchScript resolves without Python) from operators the portable arithmetic already has: its kernels, and LibTorch's own
# operations that round nothing or once per element. This file is the definition. TorchScript
# compiles it into veritrain (training/script/rewrite.cpp inlines a function where a module calls
# its operator, and the result is rewritten as any module is), and reference/decompositions_ref.py
# runs the same functions on numpy's portable kernels. Each backward is its parts' backwards.
#
# Written as LibTorch 1.13 writes each operator (aten/src/ATen/native), step for step where it can
# be: a log, an exp or a sum of LibTorch's is the portable one here, which rounds otherwise. A
# branch whose parts would give 0 ⊘ 0 in the backward (a log or sqrt of a masked-out value) takes
# the value through a `where` first, so that its gradient there is +0, as LibTorch's is. An
# `assert` is a check: one that fails for the module's constant arguments refuses the module when
# it is loaded, naming the operator and the line that calls it.
from typing import List, Optional

import torch
from torch import Tensor


def _reduced(x: Tensor, reduction: int) -> Tensor:
    # torch.nn's Reduction: 0 none, 1 mean, 2 sum.
    if reduction == 1:
        return torch.mean(x)
    if reduction == 2:
        return torch.sum(x)
    return x


def _log_at_least(x: Tensor, low: float) -> Tensor:
    # max(log(x), low), as binary_cross_entropy clamps its logs: x ≤ 0 gives low without a log.
    positive = x > 0
    return torch.where(positive, torch.clamp(torch.log(torch.where(positive, x, 1.0)), min=low),
                       low)


def _sqrt_or_zero(s: Tensor) -> Tensor:
    # sqrt(s), and +0 with a +0 gradient where s is 0 (a norm of zeros, LibTorch's masked
    # backward).
    nonzero = s != 0
    return torch.where(nonzero, torch.sqrt(torch.where(nonzero, s, 1.0)), 0.0)


def _dims(x: Tensor, dim: Optional[List[int]]) -> List[int]:
    # Every dimension for None or [], each wrapped to 0 ... dim - 1.
    out: List[int] = []
    if dim is None or len(dim) == 0:
        for d in range(x.dim()):
            out.append(d)
        return out
    for d in dim:
        out.append(d + x.dim() if d < 0 else d)
    return out


def _norm2(x: Tensor, dim: Optional[List[int]], keepdim: bool) -> Tensor:
    return _sqrt_or_zero(torch.sum(x * x, _dims(x, dim), keepdim))


def _p_is_two(p: float, op: str):
    assert p == 2.0, "portable " + op + ": p = 2 only (the Euclidean norm)"


# --- losses ---------------------------------------------------------------------------------

def l1_loss(self: Tensor, target: Tensor, reduction: int) -> Tensor:
    return _reduced(torch.abs(self - target), reduction)


def smooth_l1_loss(self: Tensor, target: Tensor, reduction: int, beta: float) -> Tensor:
    if beta == 0.0:
        return l1_loss(self, target, reduction)
    z = torch.abs(self - target)
    return _reduced(torch.where(z < beta, 0.5 * z * z / beta, z - 0.5 * beta), reduction)


def huber_loss(self: Tensor, target: Tensor, reduction: int, delta: float) -> Tensor:
    z = torch.abs(self - target)
    return _reduced(torch.where(z < delta, 0.5 * z * z, delta * (z - 0.5 * delta)), reduction)


def binary_cross_entropy(self: Tensor, target: Tensor, weight: Optional[Tensor],
                         reduction: int) -> Tensor:
    loss = (target - 1) * _log_at_least(1 - self, -100.0) - target * _log_at_least(self, -100.0)
    if weight is not None:
        loss = loss * weight
    return _reduced(loss, reduction)


def kl_div(self: Tensor, target: Tensor, reduction: int, log_target: bool) -> Tensor:
    if log_target:
        return _reduced(torch.exp(target) * (target - self), reduction)
    # xlogy(target, target): +0 where target is 0.
    zero = target == 0
    xlogy = torch.where(zero, 0.0, target * torch.log(torch.where(zero, 1.0, target)))
    return _reduced(xlogy - target * self, reduction)


def soft_margin_loss(self: Tensor, target: Tensor, reduction: int) -> Tensor:
    return _reduced(torch.log(1 + torch.exp(-target * self)), reduction)


def hinge_embedding_loss(self: Tensor, target: Tensor, margin: float, reduction: int) -> Tensor:
    zeros = torch.zeros_like(self)
    margin_clamp = torch.clamp_min(margin - self, 0)
    output_margin = torch.where(target != 1, margin_clamp, zeros)
    output_self = torch.where(target != -1, self, zeros)
    return _reduced(output_margin + output_self, reduction)


def margin_ranking_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float,
                        reduction: int) -> Tensor:
    return _reduced(torch.clamp_min(-target * (input1 - input2) + margin, 0), reduction)


def cosine_embedding_loss(input1: Tensor, input2: Tensor, target: Tensor, margin: float,
                          reduction: int) -> Tensor:
    d = target.dim()
    prod_sum = torch.sum(input1 * input2, [d])
    mag_square1 = torch.sum(input1 * input1, [d]) + 1e-12
    mag_square2 = torch.sum(input2 * input2, [d]) + 1e-12
    cos = prod_sum / torch.sqrt(mag_square1 * mag_square2)
    zeros = torch.zeros_like(cos)
    pos = 1 - cos
    neg = torch.clamp_min(cos - margin, 0)
    output = torch.where(target == 1, pos, zeros) + torch.where(target == -1, neg, zeros)
    return _reduced(output, reduction)


def poisson_nll_loss(input: Tensor, target: Tensor, log_input: bool, full: bool, eps: float,
                     reduction: int) -> Tensor:
    if log_input:
        loss = torch.exp(input) - target * input
    else:
        loss = input - target * torch.log(input + eps)
    if full:
        big = target > 1
        t = torch.where(big, target, 1.0)
        stirling = t * torch.log(t) - t + 0.5 * torch.log(2 * 3.141592653589793 * t)
        loss = loss + torch.where(big, stirling, 0.0)
    return _reduced(loss, reduction)


def multi_margin_loss(self: Tensor, target: Tensor, p: float, margin: float,
                      weight: Optional[Tensor], reduction: int) -> Tensor:
    assert p == 1.0 or p == 2.0, "portable multi_margin_loss: p = 1 or 2 only"
    classes = self.size(1)
    picked = torch.arange(classes).unsqueeze(0) == target.unsqueeze(1)
    x_target = torch.sum(torch.where(picked, self, 0.0), [1], True)
    z = torch.clamp_min(margin - x_target + self, 0)
    if p == 2.0:
        z = z * z
    if weight is not None:
        z = z * torch.embedding(weight.unsqueeze(1), target)
    z = torch.where(picked, 0.0, z)
    return _reduced(torch.sum(z, [1]) / classes, reduction)


def pairwise_distance(x1: Tensor, x2: Tensor, p: float, eps: float, keepdim: bool) -> Tensor:
    _p_is_two(p, "pairwise_distance")
    innermost = max(x1.dim(), x2.dim()) - 1
    return _norm2(x1 - x2 + eps, [innermost], keepdim)


def triplet_margin_loss(anchor: Tensor, positive: Tensor, negative: Tensor, margin: float,
                        p: float, eps: float, swap: bool, reduction: int) -> Tensor:
    dist_pos = pairwise_distance(anchor, positive, p, eps, False)
    dist_neg = pairwise_distance(anchor, negative, p, eps, False)
    if swap:
        dist_neg = torch.minimum(dist_neg, pairwise_distance(positive, negative, p, eps, False))
    return _reduced(torch.clamp_min(margin + dist_pos - dist_neg, 0), reduction)


# --- powers ---------------------------------------------------------------------------------

def pow__Tensor_Scalar(self: Tensor, exponent: float) -> Tensor:
    # At the exponents LibTorch's pow rounds alike everywhere (2, 3, 0.5, -1) rewrite.cpp keeps
    # LibTorch's; at any other, exp(e ⊗ log|x|) of the portable exp and log, with C's pow's
    # special cases: x^0 = 1, |x| = 0 gives +0 (e > 0) or +inf (e < 0), a negative x an odd
    # integer e's sign, NaN for a non-integer e.
    if exponent == 0.0:
        return torch.ones_like(self)
    magnitude = torch.abs(self)
    positive = magnitude > 0
    at_zero = 0.0 if exponent > 0.0 else float("inf")
    power = torch.where(positive,
                        torch.exp(exponent * torch.log(torch.where(positive, magnitude, 1.0))),
                        at_zero)
    if float(int(exponent)) != exponent:
        return torch.where(self < 0, float("nan"), power)
    if int(exponent) % 2 != 0:
        return torch.where(self < 0, -power, power)
    return power


# --- norms and moments ----------------------------------------------------------------------

def linalg_vector_norm(self: Tensor, ord: float, dim: Optional[List[int]], keepdim: bool,
                       dtype: Optional[int]) -> Tensor:
    _p_is_two(ord, "linalg_vector_norm")
    assert dtype is None, "portable linalg_vector_norm: a dtype of its own"
    return _norm2(self, dim, keepdim)


def norm__ScalarOpt_dim(self: Tensor, p: Optional[float], dim: List[int],
                        keepdim: bool) -> Tensor:
    if p is not None:
        _p_is_two(p, "norm")
    return _norm2(self, dim, keepdim)


def norm__Scalar(self: Tensor, p: float) -> Tensor:
    _p_is_two(p, "norm")
    return _norm2(self, None, False)


def _var(x: Tensor, dim: Optional[List[int]], correction: int, keepdim: bool) -> Tensor:
    dims = _dims(x, dim)
    n = 1
    for d in dims:
        n *= x.size(d)
    deviation = x - torch.mean(x, dims, True)
    return torch.sum(deviation * deviation, dims, keepdim) / float(max(n - correction, 0))


def var(self: Tensor, unbiased: bool) -> Tensor:
    return _var(self, None, 1 if unbiased else 0, False)


def var__dim(self: Tensor, dim: Optional[List[int]], unbiased: bool, keepdim: bool) -> Tensor:
    return _var(self, dim, 1 if unbiased else 0, keepdim)


def var__correction(self: Tensor, dim: Optional[List[int]], correction: Optional[int],
                    keepdim: bool) -> Tensor:
    return _var(self, dim, 1 if correction is None else correction, keepdim)


def std(self: Tensor, unbiased: bool) -> Tensor:
    return _sqrt_or_zero(var(self, unbiased))


def std__dim(self: Tensor, dim: Optional[List[int]], unbiased: bool, keepdim: bool) -> Tensor:
    return _sqrt_or_zero(var__dim(self, dim, unbiased, keepdim))


def std__correction(self: Tensor, dim: Optional[List[int]], correction: Optional[int],
                    keepdim: bool) -> Tensor:
    return _sqrt_or_zero(var__correction(self, dim, correction, keepdim))


# --- normalisation, pooling, moves ----------------------------------------------------------

def instance_norm(input: Tensor, weight: Optional[Tensor], bias: Optional[Tensor],
                  running_mean: Optional[Tensor], running_var: Optional[Tensor],
                  use_input_stats: bool, momentum: float, eps: float,
                  cudnn_enabled: bool) -> Tensor:
    assert running_mean is None and running_var is None and use_input_stats, \
        "portable instance_norm: running statistics (track_running_stats) have no portable kernel"
    # Each (sample, channel) normalised over its positions: a group norm of one channel a group.
    return torch.group_norm(input, input.size(1), weight, bias, eps, cudnn_enabled)


def max_pool1d(self: Tensor, kernel_size: List[int], stride: List[int], padding: List[int],
               dilation: List[int], ceil_mode: bool) -> Tensor:
    s = kernel_size[0] if len(stride) == 0 else stride[0]
    return torch.max_pool2d(self.unsqueeze(-2), [1, kernel_size[0]], [1, s], [0, padding[0]],
                            [1, dilation[0]], ceil_mode).squeeze(-2)


def max_pool1d_with_indices(self: Tensor, kernel_size: List[int], stride: List[int],
                            padding: List[int], dilation: List[int], ceil_mode: bool):
    s = kernel_size[0] if len(stride) == 0 else stride[0]
    y, i = torch.max_pool2d_with_indices(self.unsqueeze(-2), [1, kernel_size[0]], [1, s],
                                         [0, padding[0]], [1, dilation[0]], ceil_mode)
    return y.squeeze(-2), i.squeeze(-2)


def avg_pool1d(self: Tensor, kernel_size: List[int], stride: List[int], padding: List[int],
               ceil_mode: bool, count_include_pad: bool) -> Tensor:
    s = kernel_size[0] if len(stride) == 0 else stride[0]
    return torch.avg_pool2d(self.unsqueeze(-2), [1, kernel_size[0]], [1, s], [0, padding[0]],
                            ceil_mode, count_include_pad).squeeze(-2)


def adaptive_avg_pool1d(self: Tensor, output_size: List[int]) -> Tensor:
    return torch.adaptive_avg_pool2d(self.unsqueeze(-2), [1, output_size[0]]).squeeze(-2)


def _triple(v: List[int], fallback: List[int]) -> List[int]:
    if len(v) == 0:
        return fallback
    return [v[0], v[0], v[0]] if len(v) == 1 else v


def _planes_then_depth(self: Tensor, op: str, k: List[int], s: List[int], p: List[int],
                       d: List[int], ceil_mode: bool, count_include_pad: bool) -> Tensor:
    # A 3-d pool as two 2-d ones: over (h, w) in every depth slice, then over depth (a window
    # of 1 × k_d on the slices' values side by side). A max is the max of maxes, its gradient
    # the first of ties in (d, h, w) order; an average's divisor is the product of its three
    # dimensions' (LibTorch's window is a box), dividing once per stage.
    x = self.unsqueeze(0) if self.dim() == 4 else self
    assert x.dim() == 5, "portable " + op + ": [B, C, D, H, W] or [C, D, H, W] input"
    b, c, depth, h, w = x.size(0), x.size(1), x.size(2), x.size(3), x.size(4)
    slices = x.reshape([b, c * depth, h, w])
    if op == "max_pool3d":
        planes = torch.max_pool2d(slices, [k[1], k[2]], [s[1], s[2]], [p[1], p[2]], [d[1], d[2]],
                                  ceil_mode)
    else:
        planes = torch.avg_pool2d(slices, [k[1], k[2]], [s[1], s[2]], [p[1], p[2]], ceil_mode,
                                  count_include_pad)
    oh, ow = planes.size(2), planes.size(3)
    columns = planes.reshape([b, c, depth, oh * ow]).transpose(2, 3)
    if op == "max_pool3d":
        y = torch.max_pool2d(columns, [1, k[0]], [1, s[0]], [0, p[0]], [1, d[0]], ceil_mode)
    else:
        y = torch.avg_pool2d(columns, [1, k[0]], [1, s[0]], [0, p[0]], ceil_mode,
                             count_include_pad)
    out = y.transpose(2, 3).reshape([b, c, y.size(3), oh, ow])
    return out.squeeze(0) if self.dim() == 4 else out


def max_pool3d(self: Tensor, kernel_size: List[int], stride: List[int], padding: List[int],
               dilation: List[int], ceil_mode: bool) -> Tensor:
    k = _triple(kernel_size, kernel_size)
    return _planes_then_depth(self, "max_pool3d", k, _triple(stride, k), _triple(padding, [0, 0, 0]),
                              _triple(dilation, [1, 1, 1]), ceil_mode, True)


def avg_pool3d(self: Tensor, kernel_size: List[int], stride: List[int], padding: List[int],
               ceil_mode: bool, count_include_pad: bool, divisor_override: Optional[int]) -> Tensor:
    assert divisor_override is None, \
        "portable avg_pool3d: divisor_override (a divisor that does not split by dimension)"
    k = _triple(kernel_size, kernel_size)
    return _planes_then_depth(self, "avg_pool3d", k, _triple(stride, k), _triple(padding, [0, 0, 0]),
                              [1, 1, 1], ceil_mode, count_include_pad)


def channel_shuffle(self: Tensor, groups: int) -> Tensor:
    shape = self.size()
    split = [shape[0], groups, shape[1] // groups] + shape[2:]
    return self.reshape(split).transpose(1, 2).reshape(shape)


def _pad_dim(x: Tensor, d: int, left: int, right: int, reflect: bool) -> Tensor:
    n = x.size(d)
    parts: List[Tensor] = []
    if reflect:
        if left > 0:
            parts.append(x.narrow(d, 1, left).flip([d]))
        parts.append(x)
        if right > 0:
            parts.append(x.narrow(d, n - 1 - right, right).flip([d]))
    else:
        reps = [1 for _ in range(x.dim())]
        if left > 0:
            reps[d] = left
            parts.append(x.narrow(d, 0, 1).repeat(reps))
        parts.append(x)
        if right > 0:
            reps[d] = right
            parts.append(x.narrow(d, n - 1, 1).repeat(reps))
    return torch.cat(parts, d)


def pad(self: Tensor, pad: List[int], mode: str, value: Optional[float]) -> Tensor:
    if mode == "constant":
        return torch.constant_pad_nd(self, pad, 0.0 if value is None else value)
    assert mode == "reflect" or mode == "replicate", \
        "portable pad: mode '" + mode + "' (portable: constant, reflect, replicate)"
    x = self
    for i in range(len(pad) // 2):
        assert pad[2 * i] >= 0 and pad[2 * i + 1] >= 0, "portable pad: a negative " + mode + " padding"
        x = _pad_dim(x, x.dim() - 1 - i, pad[2 * i], pad[2 * i + 1], mode == "reflect")
    return x
