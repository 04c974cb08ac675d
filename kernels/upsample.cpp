// Bilinear and nearest resampling (upsample.h) on the definitions of docs/portable.md: each
// output's source rows and columns (and, bilinear, their weights) from the scaled index.
#include "kernels/upsample.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/trace.h"

namespace vt::kernels {
namespace {

// Output index i's two input indices and their weights along one dimension.
struct Taps {
  std::int64_t first = 0, second = 0;
  float near = 1.0f, far = 0.0f;  // the weights of first and second
};

Taps taps_of(std::int64_t i, std::int64_t in, float scale, bool align_corners) {
  float src =
      align_corners ? scale * static_cast<float>(i) : scale * (static_cast<float>(i) + 0.5f) - 0.5f;
  if (!(src > 0.0f)) src = 0.0f;  // below the first input, or NaN (a hostile trace's scale)
  Taps t;
  const float last = static_cast<float>(in - 1);
  t.first = src >= last ? in - 1 : static_cast<std::int64_t>(src);
  t.second = t.first < in - 1 ? t.first + 1 : t.first;
  t.far = src - static_cast<float>(t.first);
  t.near = 1.0f - t.far;
  return t;
}

std::vector<Taps> all_taps(std::int64_t out, std::int64_t in, float scale, bool align_corners) {
  std::vector<Taps> taps(static_cast<std::size_t>(out));
  for (std::int64_t i = 0; i < out; ++i)
    taps[static_cast<std::size_t>(i)] = taps_of(i, in, scale, align_corners);
  return taps;
}

std::array<trace::Param, 8> params_of(const PoolShape& s, const BilinearOptions& o) {
  return {trace::integer("planes", s.planes), trace::integer("in_h", s.in_h),
          trace::integer("in_w", s.in_w),     trace::integer("out_h", s.out_h),
          trace::integer("out_w", s.out_w),   trace::integer("align_corners", o.align_corners),
          trace::real("scale_h", o.scale_h),  trace::real("scale_w", o.scale_w)};
}

// Output i's input index for nearest resampling.
std::int64_t nearest_of(std::int64_t i, std::int64_t in, float scale) {
  const float src = std::floor(static_cast<float>(i) * scale);
  if (!(src > 0.0f)) return 0;  // also NaN (a hostile trace's scale)
  return src >= static_cast<float>(in - 1) ? in - 1 : static_cast<std::int64_t>(src);
}

std::vector<std::int64_t> all_nearest(std::int64_t out, std::int64_t in, float scale) {
  std::vector<std::int64_t> at(static_cast<std::size_t>(out));
  for (std::int64_t i = 0; i < out; ++i) at[static_cast<std::size_t>(i)] = nearest_of(i, in, scale);
  return at;
}

std::array<trace::Param, 10> nearest_params(const NearestShape& s) {
  return {trace::integer("planes", s.planes), trace::integer("in_d", s.in[0]),
          trace::integer("in_h", s.in[1]),    trace::integer("in_w", s.in[2]),
          trace::integer("out_d", s.out[0]),  trace::integer("out_h", s.out[1]),
          trace::integer("out_w", s.out[2]),  trace::real("scale_d", s.scale[0]),
          trace::real("scale_h", s.scale[1]), trace::real("scale_w", s.scale[2])};
}

// Where output (z, i, j) of a plane reads, for every output position in storage order.
std::vector<std::int64_t> nearest_reads(const NearestShape& s) {
  const std::vector<std::int64_t> zs = all_nearest(s.out[0], s.in[0], s.scale[0]);
  const std::vector<std::int64_t> is = all_nearest(s.out[1], s.in[1], s.scale[1]);
  const std::vector<std::int64_t> js = all_nearest(s.out[2], s.in[2], s.scale[2]);
  std::vector<std::int64_t> reads;
  reads.reserve(static_cast<std::size_t>(s.out[0] * s.out[1] * s.out[2]));
  for (const std::int64_t z : zs) {
    for (const std::int64_t i : is) {
      for (const std::int64_t j : js) reads.push_back((z * s.in[1] + i) * s.in[2] + j);
    }
  }
  return reads;
}

// Runs body(plane, row taps, column taps) for every plane, threads splitting planes.
template <class Body>
void each_plane(const PoolShape& s, const BilinearOptions& o, const Body& body) {
  const std::vector<Taps> rows = all_taps(s.out_h, s.in_h, o.scale_h, o.align_corners);
  const std::vector<Taps> cols = all_taps(s.out_w, s.in_w, o.scale_w, o.align_corners);
  parallel_for(s.planes, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) body(p, rows, cols);
  });
}

}  // namespace

float upsample_scale(std::int64_t in, std::int64_t out, bool align_corners, double scale_factor) {
  if (align_corners)
    return out > 1 ? static_cast<float>(in - 1) / static_cast<float>(out - 1) : 0.0f;
  if (scale_factor > 0.0) return static_cast<float>(1.0 / scale_factor);
  return static_cast<float>(in) / static_cast<float>(out);
}

void upsample_bilinear2d(const PoolShape& s, const BilinearOptions& o, const float* x, float* y) {
  const auto params = params_of(s, o);
  trace::Call traced("upsample_bilinear2d", params,
                     std::array{trace::f32("x", x, s.input_values())});
  each_plane(s, o,
             [&](std::int64_t p, const std::vector<Taps>& rows, const std::vector<Taps>& cols) {
               const float* xp = x + p * s.in_h * s.in_w;
               float* yp = y + p * s.out_h * s.out_w;
               for (std::int64_t i = 0; i < s.out_h; ++i) {
                 const Taps& r = rows[static_cast<std::size_t>(i)];
                 const float* top = xp + r.first * s.in_w;
                 const float* bottom = xp + r.second * s.in_w;
                 for (std::int64_t j = 0; j < s.out_w; ++j) {
                   const Taps& c = cols[static_cast<std::size_t>(j)];
                   const float upper = c.near * top[c.first] + c.far * top[c.second];
                   const float lower = c.near * bottom[c.first] + c.far * bottom[c.second];
                   yp[i * s.out_w + j] = r.near * upper + r.far * lower;
                 }
               }
             });
  traced.outputs({trace::f32("y", y, s.output_values())});
}

void upsample_bilinear2d_backward(const PoolShape& s, const BilinearOptions& o, const float* dy,
                                  float* dx) {
  const auto params = params_of(s, o);
  trace::Call traced("upsample_bilinear2d_backward", params,
                     std::array{trace::f32("dy", dy, s.output_values())});
  each_plane(s, o,
             [&](std::int64_t p, const std::vector<Taps>& rows, const std::vector<Taps>& cols) {
               float* dxp = dx + p * s.in_h * s.in_w;
               const float* dyp = dy + p * s.out_h * s.out_w;
               std::fill(dxp, dxp + s.in_h * s.in_w, 0.0f);
               for (std::int64_t i = 0; i < s.out_h; ++i) {
                 const Taps& r = rows[static_cast<std::size_t>(i)];
                 float* top = dxp + r.first * s.in_w;
                 float* bottom = dxp + r.second * s.in_w;
                 for (std::int64_t j = 0; j < s.out_w; ++j) {
                   const Taps& c = cols[static_cast<std::size_t>(j)];
                   const float g = dyp[i * s.out_w + j];
                   top[c.first] = top[c.first] + (r.near * c.near) * g;
                   top[c.second] = top[c.second] + (r.near * c.far) * g;
                   bottom[c.first] = bottom[c.first] + (r.far * c.near) * g;
                   bottom[c.second] = bottom[c.second] + (r.far * c.far) * g;
                 }
               }
             });
  traced.outputs({trace::f32("dx", dx, s.input_values())});
}

void upsample_nearest(const NearestShape& s, const float* x, float* y) {
  const auto params = nearest_params(s);
  trace::Call traced("upsample_nearest", params, std::array{trace::f32("x", x, s.input_values())});
  const std::vector<std::int64_t> reads = nearest_reads(s);
  const std::int64_t in_plane = s.in[0] * s.in[1] * s.in[2];
  const auto out_plane = static_cast<std::int64_t>(reads.size());
  parallel_for(s.planes, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) {
      const float* from = x + p * in_plane;
      float* to = y + p * out_plane;
      for (std::int64_t q = 0; q < out_plane; ++q) to[q] = from[reads[static_cast<std::size_t>(q)]];
    }
  });
  traced.outputs({trace::f32("y", y, s.output_values())});
}

void upsample_nearest_backward(const NearestShape& s, const float* dy, float* dx) {
  const auto params = nearest_params(s);
  trace::Call traced("upsample_nearest_backward", params,
                     std::array{trace::f32("dy", dy, s.output_values())});
  const std::vector<std::int64_t> reads = nearest_reads(s);
  const std::int64_t in_plane = s.in[0] * s.in[1] * s.in[2];
  const auto out_plane = static_cast<std::int64_t>(reads.size());
  parallel_for(s.planes, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t p = begin; p < end; ++p) {
      float* to = dx + p * in_plane;
      const float* g = dy + p * out_plane;
      std::fill(to, to + in_plane, 0.0f);
      for (std::int64_t q = 0; q < out_plane; ++q) {
        const std::int64_t at = reads[static_cast<std::size_t>(q)];
        to[at] = to[at] + g[q];
      }
    }
  });
  traced.outputs({trace::f32("dx", dx, s.input_values())});
}

}  // namespace vt::kernels
