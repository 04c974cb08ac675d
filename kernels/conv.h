#pragma once
// Convolutions in the portable arithmetic (docs/portable.md, "Convolution"): 2-d and 3-d alike,
// a 2-d convolution being a 3-d one of depth 1. Inputs are contiguous [B, C, D, H, W], weights
// [O, C, kD, kH, kW], outputs [B, O, OD, OH, OW] with OD = (D + 2·pD − kD) / sD + 1 (likewise
// H and W).
//
// The column matrix of example b has one row per q = (c, t, u, v) in that order and one column
// per output position p = (z, i, j); its entry is x[b, c, z·sD + t − pD, i·sH + u − pH,
// j·sW + v − pW], or +0.0 where that falls in the padding. Then:
//   y[b, o, p]  = chain over q of w[o, q]·col[q, p], then + bias[o]
//   dw[o, q]    = chain over (b, then p) of dy[b, o, p]·col_b[q, p]
//   dbias[o]    = chain over (b, then p) of dy[b, o, p]
//   dx, stride 1 and padding p ≤ k − 1 in every dimension: the convolution above of dy
//                 (O channels in, C out) with padding k − 1 − p and the weights transposed and
//                 flipped, w'[c, o, t, u, v] = w[o, c, kD − 1 − t, kH − 1 − u, kW − 1 − v];
//   dx, otherwise: dcol[q, p] = chain over o of w[o, q]·dy[b, o, p]; dx[b, c, ·] = +0.0, then
//                 for (t, u, v) in order, + dcol at the column that reads it.

#include <cstdint>

namespace vt::kernels {

struct ConvShape {
  std::int64_t batch = 1, in_channels = 1, out_channels = 1;
  std::int64_t in[3] = {1, 1, 1};      // D, H, W
  std::int64_t kernel[3] = {1, 1, 1};  // kD, kH, kW
  std::int64_t stride[3] = {1, 1, 1};
  std::int64_t padding[3] = {0, 0, 0};
  // Tap t reads position z·s + t·dilation − p (docs/portable.md, "Convolution, further forms").
  std::int64_t dilation[3] = {1, 1, 1};

  std::int64_t out(int d) const {
    return (in[d] + 2 * padding[d] - dilation[d] * (kernel[d] - 1) - 1) / stride[d] + 1;
  }
  bool dilated() const { return dilation[0] != 1 || dilation[1] != 1 || dilation[2] != 1; }
  std::int64_t out_positions() const { return out(0) * out(1) * out(2); }
  std::int64_t in_positions() const { return in[0] * in[1] * in[2]; }
  std::int64_t taps() const { return kernel[0] * kernel[1] * kernel[2]; }
  std::int64_t rows() const { return in_channels * taps(); }  // q: the column matrix's rows
};

// `bias` may be null. Any dilation; groups 1 (grouped_conv_* below for more).
void conv_forward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y);

// Any of dx, dw, dbias may be null (not needed); x is read for dw alone.
void conv_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx,
                   float* dw, float* dbias);

// G groups: the C input and O output channels (s's counts, all groups together) split into G
// consecutive equal groups, group g a convolution of its own with weights w[g·O/G ...] of
// C/G input channels each. G = 1 is conv_forward / conv_backward.
void grouped_conv_forward(const ConvShape& s, std::int64_t groups, const float* x, const float* w,
                          const float* bias, float* y);
void grouped_conv_backward(const ConvShape& s, std::int64_t groups, const float* x, const float* w,
                           const float* dy, float* dx, float* dw, float* dbias);

// The transposed convolution of the convolution `s` describes (s.in: the transposed output's
// size, s.out: its input's): y = that convolution's dx with dy = x, then + bias. Its weight is
// the convolution's, [C_x, O_y / G, k...] with C_x = s.out_channels. Backward: dx is the
// convolution of dy (no bias), dw that convolution's weight gradient with dy as its input and x
// as its output gradient, dbias the chain over (b, then positions) of dy.
void conv_transpose_forward(const ConvShape& s, std::int64_t groups, const float* x, const float* w,
                            const float* bias, float* y);
void conv_transpose_backward(const ConvShape& s, std::int64_t groups, const float* x,
                             const float* w, const float* dy, float* dx, float* dw, float* dbias);

}  // namespace vt::kernels
