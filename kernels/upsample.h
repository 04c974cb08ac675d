#pragma once
// Bilinear and nearest resampling of [B, C, H, W] planes in the portable arithmetic
// (docs/portable.md, "Operators of real models": Pooling, upsample_bilinear2d and
// upsample_nearest). Threads split the (b, c) planes; within a plane every output is computed
// alone and the backward's additions into dx run in output order.

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

// Nearest resampling of [planes, D, H, W] (1-d and 2-d: D, H of 1): along each dimension
// output i copies input min(⌊float(i) ⊗ scale⌋, in − 1), scale upsample_scale's without
// align_corners; the backward adds dy into the input it copied, outputs in order.
struct NearestShape {
  std::int64_t planes = 1;
  std::int64_t in[3] = {1, 1, 1}, out[3] = {1, 1, 1};  // D, H, W
  float scale[3] = {1.0f, 1.0f, 1.0f};
  std::int64_t input_values() const { return planes * in[0] * in[1] * in[2]; }
  std::int64_t output_values() const { return planes * out[0] * out[1] * out[2]; }
};
void upsample_nearest(const NearestShape& s, const float* x, float* y);
void upsample_nearest_backward(const NearestShape& s, const float* dy, float* dx);

}  // namespace vt::kernels
