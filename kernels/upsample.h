#pragma once
// Bilinear resampling of [B, C, H, W] planes in the portable arithmetic (docs/portable.md,
// "Operators of real models": Pooling, upsample_bilinear2d). Threads split the (b, c) planes;
// within a plane every output is computed alone and the backward's additions into dx run in output
// order.

#include <cstdint>

#include "kernels/pool.h"

namespace vt::kernels {

// The ratio an output index is scaled by to reach the input: with align_corners (in − 1) ⊘
// (out − 1), +0 for one output; else 1 / scale_factor rounded once to binary32 when the caller
// gave one (> 0), or in ⊘ out.
float upsample_scale(std::int64_t in, std::int64_t out, bool align_corners, double scale_factor);

struct BilinearOptions {
  bool align_corners = false;
  float scale_h = 1.0f, scale_w = 1.0f;  // upsample_scale of each dimension
};

// s.in_h × s.in_w → s.out_h × s.out_w (the shape's kernel, stride, padding are not read).
void upsample_bilinear2d(const PoolShape& s, const BilinearOptions& o, const float* x, float* y);
void upsample_bilinear2d_backward(const PoolShape& s, const BilinearOptions& o, const float* dy,
                                  float* dx);

}  // namespace vt::kernels
