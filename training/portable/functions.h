#pragma once
// The portable kernels (kernels/) as differentiable LibTorch functions: each forward and each
// backward is one call into kernels/, so autograd only routes gradients (and adds the gradients
// of a tensor used twice, an exact IEEE addition of two values). Float32 CPU tensors only.
// Internal to training/ (LibTorch types).

#include <ATen/ATen.h>

#include <cstdint>
#include <tuple>

namespace vt::training::portable {

// y = x·wᵀ + b over the last dimension of x (b may be undefined).
at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b);
// 2-d ([B, C, H, W], w [O, C, kH, kW]) or 3-d ([B, C, D, H, W]) by w's rank; b may be undefined.
at::Tensor conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                at::IntArrayRef stride, at::IntArrayRef padding);
// Any dilation and groups; 1-d ([B, C, L], w [O, C/G, k]) too.
at::Tensor conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                std::int64_t groups);
// Batch statistics and a running-statistics update when training, else the running statistics.
// relu: relu(batch norm), fused in training (one pass, and the gradient masked in the norm's).
at::Tensor batch_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                      const at::Tensor& running_mean, const at::Tensor& running_var, bool training,
                      double momentum, double eps, bool relu = false);
at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps);
at::Tensor embedding(const at::Tensor& ids, const at::Tensor& table);
// a [N, ...] + b, b broadcast over a's first dimension; b's gradient is one chain over it.
at::Tensor add_rows(const at::Tensor& a, const at::Tensor& b);
// Causal self-attention of qkv [B, T, 3D] (q, k, v side by side, each of H heads of width
// d = D / H) into [B, T, D]: per head softmax(q·kᵀ / divisor, query i seeing keys 0..i), dropout
// with probability p (none at 0) keyed by the stream state and call number, times v. Each
// gradient is written once into its place (no addition touches it).
at::Tensor attention(const at::Tensor& qkv, std::int64_t heads, double divisor, double p,
                     std::uint64_t state, std::uint64_t call);
// Keep-mask from the stream state and call number (kernels::dropout).
at::Tensor dropout(const at::Tensor& x, double p, std::uint64_t state, std::uint64_t call);
at::Tensor relu(const at::Tensor& x);
at::Tensor gelu(const at::Tensor& x);
// Mean over every dimension after the second: [B, C, ...] -> [B, C].
at::Tensor spatial_mean(const at::Tensor& x);
// [N, M, K] · [N, K, P] -> [N, M, P].
at::Tensor bmm(const at::Tensor& a, const at::Tensor& b);
// Softmax over the last dimension of x / divisor; causal: row i of each [T, T] block sees
// columns 0..i.
at::Tensor softmax(const at::Tensor& x, double divisor, bool causal);
// Mean cross-entropy of [N, C] logits against [N] int64 class ids; a float scalar.
at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets);
// Mean squared error; a float scalar.
at::Tensor mse(const at::Tensor& output, const at::Tensor& target);

}  // namespace vt::training::portable
