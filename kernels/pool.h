#pragma once
// Pooling over [B, C, H, W] in the portable arithmetic (docs/portable.md, "Operators of real
// models": Pooling). Threads split the (b, c) planes; within a plane every output is computed
// alone and the backward's additions into dx run in output order.

#include <cstdint>

namespace vt::kernels {

struct PoolShape {
  std::int64_t planes = 1;  // B·C
  std::int64_t in_h = 1, in_w = 1;
  std::int64_t out_h = 1, out_w = 1;
  std::int64_t kernel_h = 1, kernel_w = 1;
  std::int64_t stride_h = 1, stride_w = 1;
  std::int64_t pad_h = 0, pad_w = 0;
  std::int64_t dilation_h = 1, dilation_w = 1;
  std::int64_t input_values() const { return planes * in_h * in_w; }
  std::int64_t output_values() const { return planes * out_h * out_w; }
};

// LibTorch's output size: ⌊(in + 2·pad − dilation·(kernel − 1) − 1) / stride⌋ + 1, the ceiling
// with ceil_mode, less one when the last window would start at or past in + pad. 0 or less:
// the window does not fit (the caller refuses it).
std::int64_t pool_out_size(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                           std::int64_t pad, std::int64_t dilation, bool ceil_mode);

// Max pooling: the first of equal maxima wins, NaN wins. argmax (may be null) receives each
// output's winning position within its plane (h·W + w), for the backward.
void max_pool2d(const PoolShape& s, const float* x, float* y, std::int64_t* argmax);
void max_pool2d_backward(const PoolShape& s, const std::int64_t* argmax, const float* dy,
                         float* dx);

// Average pooling; divisor_override 0: none.
struct AvgPoolOptions {
  bool count_include_pad = true;
  std::int64_t divisor_override = 0;
};
void avg_pool2d(const PoolShape& s, const AvgPoolOptions& o, const float* x, float* y);
void avg_pool2d_backward(const PoolShape& s, const AvgPoolOptions& o, const float* dy, float* dx);

// Adaptive pooling to out_h × out_w (the shape's kernel, stride, padding are not read): output
// i covers rows [⌊i·H / OH⌋, ⌈(i + 1)·H / OH⌉), likewise columns.
void adaptive_avg_pool2d(const PoolShape& s, const float* x, float* y);
void adaptive_avg_pool2d_backward(const PoolShape& s, const float* dy, float* dx);
void adaptive_max_pool2d(const PoolShape& s, const float* x, float* y, std::int64_t* argmax);

}  // namespace vt::kernels
