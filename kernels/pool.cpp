#include "kernels/pool.h"

#include <algorithm>
#include <array>
#include <span>

#include "kernels/parallel.h"
#include "kernels/trace.h"

namespace vt::kernels {
namespace {

bool is_nan(float v) { return v != v; }

// Runs body(plane) for every (b, c) plane, threads splitting planes.
template <typename Body>
void planes(const PoolShape& s, const Body& body) {
  parallel_for(s.planes, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) body(p);
  });
}

// The rows (or columns) window i of an avg pool covers, before and after clipping to the input.
struct Span {
  std::int64_t begin, end;   // clipped to [0, in)
  std::int64_t padded_size;  // with the padding, as count_include_pad counts it
};
Span avg_span(std::int64_t i, std::int64_t in, std::int64_t kernel, std::int64_t stride,
              std::int64_t pad) {
  const std::int64_t start = i * stride - pad;
  const std::int64_t end = std::min(start + kernel, in + pad);
  return {std::max<std::int64_t>(start, 0), std::min(end, in), end - start};
}

std::int64_t adaptive_begin(std::int64_t i, std::int64_t in, std::int64_t out) {
  return (i * in) / out;
}
std::int64_t adaptive_end(std::int64_t i, std::int64_t in, std::int64_t out) {
  return ((i + 1) * in + out - 1) / out;
}

float avg_divisor(const AvgPoolOptions& o, const Span& rows, const Span& cols) {
  if (o.divisor_override != 0) return static_cast<float>(o.divisor_override);
  if (o.count_include_pad) return static_cast<float>(rows.padded_size * cols.padded_size);
  return static_cast<float>((rows.end - rows.begin) * (cols.end - cols.begin));
}

// The max rule over positions seen in order: the first value, then any later one that is
// greater or NaN (a later NaN replaces an earlier one, as in LibTorch).
struct MaxScan {
  float best = 0.0f;
  std::int64_t at = -1;
  void see(float v, std::int64_t pos) {
    if (at < 0 || v > best || is_nan(v)) {
      best = v;
      at = pos;
    }
  }
};

// Every field of the shape, and an average pool's options: the trace records them all,
// whichever the operator reads (adaptive pooling reads no kernel, stride or padding).
constexpr std::size_t kShapeParams = 13;
std::array<trace::Param, kShapeParams + 2> pool_params(const PoolShape& s,
                                                       const AvgPoolOptions& o = {}) {
  return {trace::integer("planes", s.planes),
          trace::integer("in_h", s.in_h),
          trace::integer("in_w", s.in_w),
          trace::integer("out_h", s.out_h),
          trace::integer("out_w", s.out_w),
          trace::integer("kernel_h", s.kernel_h),
          trace::integer("kernel_w", s.kernel_w),
          trace::integer("stride_h", s.stride_h),
          trace::integer("stride_w", s.stride_w),
          trace::integer("pad_h", s.pad_h),
          trace::integer("pad_w", s.pad_w),
          trace::integer("dilation_h", s.dilation_h),
          trace::integer("dilation_w", s.dilation_w),
          trace::integer("count_include_pad", o.count_include_pad ? 1 : 0),
          trace::integer("divisor_override", o.divisor_override)};
}
// The shape's parameters alone (the max and adaptive pools have no options).
std::span<const trace::Param> shape_only(const std::array<trace::Param, kShapeParams + 2>& p) {
  return std::span(p).first(kShapeParams);
}

}  // namespace

std::int64_t pool_out_size(std::int64_t in, std::int64_t kernel, std::int64_t stride,
                           std::int64_t pad, std::int64_t dilation, bool ceil_mode) {
  const std::int64_t span = in + 2 * pad - dilation * (kernel - 1) - 1;
  if (span < 0 || stride <= 0) return 0;
  std::int64_t out = (ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  return out;
}

void max_pool2d(const PoolShape& s, const float* x, float* y, std::int64_t* argmax) {
  const auto params = pool_params(s);
  const std::int64_t in = s.input_values(), out = s.output_values();
  trace::Call traced("max_pool2d", shape_only(params), std::array{trace::f32("x", x, in)});
  const std::int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;
  planes(s, [&](std::int64_t p) {
    const float* xp = x + p * in_plane;
    for (std::int64_t i = 0; i < s.out_h; ++i) {
      for (std::int64_t j = 0; j < s.out_w; ++j) {
        MaxScan m;
        for (std::int64_t a = 0; a < s.kernel_h; ++a) {
          const std::int64_t h = i * s.stride_h - s.pad_h + a * s.dilation_h;
          if (h < 0 || h >= s.in_h) continue;
          for (std::int64_t e = 0; e < s.kernel_w; ++e) {
            const std::int64_t w = j * s.stride_w - s.pad_w + e * s.dilation_w;
            if (w < 0 || w >= s.in_w) continue;
            m.see(xp[h * s.in_w + w], h * s.in_w + w);
          }
        }
        const std::int64_t o = p * out_plane + i * s.out_w + j;
        y[o] = m.best;
        if (argmax != nullptr) argmax[o] = m.at;
      }
    }
  });
  traced.outputs({trace::f32("y", y, out), trace::i64("argmax", argmax, argmax ? out : 0)});
}

void max_pool2d_backward(const PoolShape& s, const std::int64_t* argmax, const float* dy,
                         float* dx) {
  const auto params = pool_params(s);
  const std::int64_t in = s.input_values(), out = s.output_values();
  trace::Call traced("max_pool2d_backward", shape_only(params),
                     std::array{trace::i64("argmax", argmax, out), trace::f32("dy", dy, out)});
  const std::int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;
  planes(s, [&](std::int64_t p) {
    float* dxp = dx + p * in_plane;
    std::fill(dxp, dxp + in_plane, 0.0f);
    for (std::int64_t o = 0; o < out_plane; ++o) {
      const std::int64_t at = argmax[p * out_plane + o];
      if (at >= 0) dxp[at] = dxp[at] + dy[p * out_plane + o];
    }
  });
  traced.outputs({trace::f32("dx", dx, in)});
}

void avg_pool2d(const PoolShape& s, const AvgPoolOptions& o, const float* x, float* y) {
  const auto params = pool_params(s, o);
  const std::int64_t in = s.input_values(), out = s.output_values();
  trace::Call traced("avg_pool2d", params, std::array{trace::f32("x", x, in)});
  const std::int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;
  planes(s, [&](std::int64_t p) {
    const float* xp = x + p * in_plane;
    for (std::int64_t i = 0; i < s.out_h; ++i) {
      const Span rows = avg_span(i, s.in_h, s.kernel_h, s.stride_h, s.pad_h);
      for (std::int64_t j = 0; j < s.out_w; ++j) {
        const Span cols = avg_span(j, s.in_w, s.kernel_w, s.stride_w, s.pad_w);
        float sum = 0.0f;
        for (std::int64_t h = rows.begin; h < rows.end; ++h) {
          for (std::int64_t w = cols.begin; w < cols.end; ++w) sum = sum + xp[h * s.in_w + w];
        }
        y[p * out_plane + i * s.out_w + j] = sum / avg_divisor(o, rows, cols);
      }
    }
  });
  traced.outputs({trace::f32("y", y, out)});
}

void avg_pool2d_backward(const PoolShape& s, const AvgPoolOptions& o, const float* dy, float* dx) {
  const auto params = pool_params(s, o);
  const std::int64_t in = s.input_values(), out = s.output_values();
  trace::Call traced("avg_pool2d_backward", params, std::array{trace::f32("dy", dy, out)});
  const std::int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;
  planes(s, [&](std::int64_t p) {
    float* dxp = dx + p * in_plane;
    std::fill(dxp, dxp + in_plane, 0.0f);
    for (std::int64_t i = 0; i < s.out_h; ++i) {
      const Span rows = avg_span(i, s.in_h, s.kernel_h, s.stride_h, s.pad_h);
      for (std::int64_t j = 0; j < s.out_w; ++j) {
        const Span cols = avg_span(j, s.in_w, s.kernel_w, s.stride_w, s.pad_w);
        const float g = dy[p * out_plane + i * s.out_w + j] / avg_divisor(o, rows, cols);
        for (std::int64_t h = rows.begin; h < rows.end; ++h) {
          for (std::int64_t w = cols.begin; w < cols.end; ++w)
            dxp[h * s.in_w + w] = dxp[h * s.in_w + w] + g;
        }
      }
    }
  });
  traced.outputs({trace::f32("dx", dx, in)});
}

void adaptive_avg_pool2d(const PoolShape& s, const float* x, float* y) {
  const auto params = pool_params(s);
  const std::int64_t in = s.input_values(), out = s.output_values();
  trace::Call traced("adaptive_avg_pool2d", shape_only(params), std::array{trace::f32("x", x, in)});
  const std::int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;
  planes(s, [&](std::int64_t p) {
    const float* xp = x + p * in_plane;
    for (std::int64_t i = 0; i < s.out_h; ++i) {
      const std::int64_t h0 = adaptive_begin(i, s.in_h, s.out_h),
                         h1 = adaptive_end(i, s.in_h, s.out_h);
      for (std::int64_t j = 0; j < s.out_w; ++j) {
        const std::int64_t w0 = adaptive_begin(j, s.in_w, s.out_w),
                           w1 = adaptive_end(j, s.in_w, s.out_w);
        float sum = 0.0f;
        for (std::int64_t h = h0; h < h1; ++h) {
          for (std::int64_t w = w0; w < w1; ++w) sum = sum + xp[h * s.in_w + w];
        }
        y[p * out_plane + i * s.out_w + j] = sum / static_cast<float>((h1 - h0) * (w1 - w0));
      }
    }
  });
  traced.outputs({trace::f32("y", y, out)});
}

void adaptive_avg_pool2d_backward(const PoolShape& s, const float* dy, float* dx) {
  const auto params = pool_params(s);
  const std::int64_t in = s.input_values(), out = s.output_values();
  trace::Call traced("adaptive_avg_pool2d_backward", shape_only(params),
                     std::array{trace::f32("dy", dy, out)});
  const std::int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;
  planes(s, [&](std::int64_t p) {
    float* dxp = dx + p * in_plane;
    std::fill(dxp, dxp + in_plane, 0.0f);
    for (std::int64_t i = 0; i < s.out_h; ++i) {
      const std::int64_t h0 = adaptive_begin(i, s.in_h, s.out_h),
                         h1 = adaptive_end(i, s.in_h, s.out_h);
      for (std::int64_t j = 0; j < s.out_w; ++j) {
        const std::int64_t w0 = adaptive_begin(j, s.in_w, s.out_w),
                           w1 = adaptive_end(j, s.in_w, s.out_w);
        const float g =
            dy[p * out_plane + i * s.out_w + j] / static_cast<float>((h1 - h0) * (w1 - w0));
        for (std::int64_t h = h0; h < h1; ++h) {
          for (std::int64_t w = w0; w < w1; ++w) dxp[h * s.in_w + w] = dxp[h * s.in_w + w] + g;
        }
      }
    }
  });
  traced.outputs({trace::f32("dx", dx, in)});
}

void adaptive_max_pool2d(const PoolShape& s, const float* x, float* y, std::int64_t* argmax) {
  const auto params = pool_params(s);
  const std::int64_t in = s.input_values(), out = s.output_values();
  trace::Call traced("adaptive_max_pool2d", shape_only(params), std::array{trace::f32("x", x, in)});
  const std::int64_t in_plane = s.in_h * s.in_w, out_plane = s.out_h * s.out_w;
  planes(s, [&](std::int64_t p) {
    const float* xp = x + p * in_plane;
    for (std::int64_t i = 0; i < s.out_h; ++i) {
      const std::int64_t h0 = adaptive_begin(i, s.in_h, s.out_h),
                         h1 = adaptive_end(i, s.in_h, s.out_h);
      for (std::int64_t j = 0; j < s.out_w; ++j) {
        const std::int64_t w0 = adaptive_begin(j, s.in_w, s.out_w),
                           w1 = adaptive_end(j, s.in_w, s.out_w);
        MaxScan m;
        for (std::int64_t h = h0; h < h1; ++h) {
          for (std::int64_t w = w0; w < w1; ++w) m.see(xp[h * s.in_w + w], h * s.in_w + w);
        }
        const std::int64_t o = p * out_plane + i * s.out_w + j;
        y[o] = m.best;
        if (argmax != nullptr) argmax[o] = m.at;
      }
    }
  });
  traced.outputs({trace::f32("y", y, out), trace::i64("argmax", argmax, argmax ? out : 0)});
}

}  // namespace vt::kernels
