#pragma once
// The portable kernels of real models' layers (docs/portable.md, "Operators of real models") as
// differentiable LibTorch functions: group norm, the further losses, recurrent layers and the
// random operators (the element-wise, pooling, product and reduction operators:
// portable/operators.h). Each forward and backward is kernels/ arithmetic; LibTorch only copies and
// routes gradients. Float32 CPU tensors only. Internal to training/ (LibTorch types).

#include <ATen/ATen.h>

#include <cstdint>
#include <tuple>

#include "kernels/rnn.h"

namespace vt::training::portable {

at::Tensor group_norm(const at::Tensor& x, std::int64_t groups, const at::Tensor& w,
                      const at::Tensor& b, double eps);

at::Tensor nll_loss(const at::Tensor& logp, const at::Tensor& target, std::int64_t ignore_index);
// Label smoothing eps > 0 (eps 0: portable/functions.h's cross_entropy).
at::Tensor cross_entropy_smoothed(const at::Tensor& logits, const at::Tensor& target, double eps);
at::Tensor bce_with_logits(const at::Tensor& x, const at::Tensor& target);

// One layer and direction: x [T, B, I], h0 and c0 [B, H] (c0 undefined for a GRU); returns y
// [T, B, H], hn, cn (undefined for a GRU). Biases may be undefined. An LSTM's projection w_hr
// [P, H] (proj_size) makes h0, y and hn P wide.
std::tuple<at::Tensor, at::Tensor, at::Tensor> rnn_layer(
    const at::Tensor& x, const at::Tensor& h0, const at::Tensor& c0, const at::Tensor& w_ih,
    const at::Tensor& w_hh, const at::Tensor& b_ih, const at::Tensor& b_hh, kernels::Cell cell,
    bool reverse, const at::Tensor& w_hr = {});

// Dropout of whole channels of x [B, C, ...] from the stream (state, call).
at::Tensor feature_dropout(const at::Tensor& x, double p, std::uint64_t state, std::uint64_t call);
// A tensor of x's shape of 1 (probability p) and 0 from the stream; no gradient.
at::Tensor bernoulli(const at::Tensor& like, double p, std::uint64_t state, std::uint64_t call);
// Ones where the draw is below the probability of the same position (kernels::bernoulli_of), no
// gradient to p (PyTorch gives it none).
at::Tensor bernoulli_of(const at::Tensor& p, std::uint64_t state, std::uint64_t call);
// Uniforms in [0, 1) of `shape` (kernels::uniform), binary32.
at::Tensor uniform(at::IntArrayRef shape, std::uint64_t state, std::uint64_t call);
// Integers in [low, high) of `shape` (kernels::randint), int64; high > low.
at::Tensor randint(std::int64_t low, std::int64_t high, at::IntArrayRef shape, std::uint64_t state,
                   std::uint64_t call);
// Standard normals of `shape` (kernels::normal), binary32.
at::Tensor normal(at::IntArrayRef shape, std::uint64_t state, std::uint64_t call);

}  // namespace vt::training::portable
