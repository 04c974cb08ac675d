// Convolutions of any dilation and groups, and transposed convolutions (conv.h), on the
// definitions of docs/portable.md: a dilated convolution builds each example's column matrix
// explicitly and multiplies it (the products' chains run over q in order, as defined); groups are
// convolutions of their own over contiguous copies of their channels.
#include <algorithm>
#include <array>
#include <vector>

#include "kernels/conv.h"
#include "kernels/conv_grid.h"
#include "kernels/conv_paths.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "kernels/trace.h"

namespace vt::kernels {
namespace {

// col[q][p] of example b (q = (c, t, u, v), p = (z, i, j)), +0.0 in the padding.
void columns(const ConvShape& s, const float* xb, float* col) {
  const std::int64_t od = s.out(0), oh = s.out(1), ow = s.out(2), positions = s.out_positions();
  parallel_for(s.in_channels, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      const float* xc = xb + c * s.in_positions();
      for (std::int64_t t = 0; t < s.kernel[0]; ++t) {
        for (std::int64_t u = 0; u < s.kernel[1]; ++u) {
          for (std::int64_t v = 0; v < s.kernel[2]; ++v) {
            const std::int64_t q = ((c * s.kernel[0] + t) * s.kernel[1] + u) * s.kernel[2] + v;
            float* row = col + q * positions;
            for (std::int64_t z = 0; z < od; ++z) {
              const std::int64_t dz = z * s.stride[0] + t * s.dilation[0] - s.padding[0];
              for (std::int64_t i = 0; i < oh; ++i) {
                const std::int64_t di = i * s.stride[1] + u * s.dilation[1] - s.padding[1];
                for (std::int64_t j = 0; j < ow; ++j) {
                  const std::int64_t dj = j * s.stride[2] + v * s.dilation[2] - s.padding[2];
                  const bool inside =
                      dz >= 0 && dz < s.in[0] && di >= 0 && di < s.in[1] && dj >= 0 && dj < s.in[2];
                  row[(z * oh + i) * ow + j] =
                      inside ? xc[(dz * s.in[1] + di) * s.in[2] + dj] : 0.0f;
                }
              }
            }
          }
        }
      }
    }
  });
}

// dx of example b from dcol: +0.0, then for each channel, tap (t, u, v) in order, each position
// column p reads through that tap gets + dcol[q][p].
void scatter_columns(const ConvShape& s, const float* dcol, float* dxb) {
  const std::int64_t od = s.out(0), oh = s.out(1), ow = s.out(2), positions = s.out_positions();
  parallel_for(s.in_channels, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      float* dxc = dxb + c * s.in_positions();
      std::fill(dxc, dxc + s.in_positions(), 0.0f);
      for (std::int64_t t = 0; t < s.kernel[0]; ++t) {
        for (std::int64_t u = 0; u < s.kernel[1]; ++u) {
          for (std::int64_t v = 0; v < s.kernel[2]; ++v) {
            const std::int64_t q = ((c * s.kernel[0] + t) * s.kernel[1] + u) * s.kernel[2] + v;
            const float* row = dcol + q * positions;
            for (std::int64_t z = 0; z < od; ++z) {
              const std::int64_t dz = z * s.stride[0] + t * s.dilation[0] - s.padding[0];
              if (dz < 0 || dz >= s.in[0]) continue;
              for (std::int64_t i = 0; i < oh; ++i) {
                const std::int64_t di = i * s.stride[1] + u * s.dilation[1] - s.padding[1];
                if (di < 0 || di >= s.in[1]) continue;
                for (std::int64_t j = 0; j < ow; ++j) {
                  const std::int64_t dj = j * s.stride[2] + v * s.dilation[2] - s.padding[2];
                  if (dj < 0 || dj >= s.in[2]) continue;
                  float& at = dxc[(dz * s.in[1] + di) * s.in[2] + dj];
                  at = at + row[(z * oh + i) * ow + j];
                }
              }
            }
          }
        }
      }
    }
  });
}

void dilated_conv_forward(const ConvShape& s, const float* x, const float* w, const float* bias,
                          float* y) {
  const std::int64_t positions = s.out_positions(), rows = s.rows();
  std::vector<float> col(static_cast<std::size_t>(rows * positions));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    columns(s, x + b * s.in_channels * s.in_positions(), col.data());
    float* yb = y + b * s.out_channels * positions;
    gemm(s.out_channels, positions, rows, {w, rows, 1}, {col.data(), positions, 1}, yb, positions);
    if (bias == nullptr) continue;
    for (std::int64_t o = 0; o < s.out_channels; ++o) {
      for (std::int64_t p = 0; p < positions; ++p)
        yb[o * positions + p] = yb[o * positions + p] + bias[o];
    }
  }
}

void dilated_conv_backward(const ConvShape& s, const float* x, const float* w, const float* dy,
                           float* dx, float* dw, float* dbias) {
  const std::int64_t positions = s.out_positions(), rows = s.rows();
  std::vector<float> col(static_cast<std::size_t>(rows * positions));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    const float* dyb = dy + b * s.out_channels * positions;
    if (dw != nullptr) {
      // dw[o][q]: the chain over (b, then p) continues from the examples before.
      columns(s, x + b * s.in_channels * s.in_positions(), col.data());
      gemm(s.out_channels, rows, positions, {dyb, positions, 1}, {col.data(), 1, positions}, dw,
           rows, /*accumulate=*/b > 0);
    }
    if (dx != nullptr) {
      gemm(rows, positions, s.out_channels, {w, 1, rows}, {dyb, positions, 1}, col.data(),
           positions);
      scatter_columns(s, col.data(), dx + b * s.in_channels * s.in_positions());
    }
  }
  if (dbias != nullptr) bias_gradient(s, dy, dbias);
}

// Channels [c0, c0 + n) of every example of a [B, C, P] tensor, copied to or from a contiguous
// [B, n, P] one.
void gather_channels(const float* from, std::int64_t batch, std::int64_t channels,
                     std::int64_t positions, std::int64_t c0, std::int64_t n, float* to) {
  for (std::int64_t b = 0; b < batch; ++b)
    std::copy(from + (b * channels + c0) * positions, from + (b * channels + c0 + n) * positions,
              to + b * n * positions);
}
void scatter_channels(const float* from, std::int64_t batch, std::int64_t channels,
                      std::int64_t positions, std::int64_t c0, std::int64_t n, float* to) {
  for (std::int64_t b = 0; b < batch; ++b)
    std::copy(from + b * n * positions, from + (b + 1) * n * positions,
              to + (b * channels + c0) * positions);
}

// Runs body(group shape, group index) for each group, with the group's slices made contiguous.
ConvShape group_shape(const ConvShape& s, std::int64_t groups) {
  ConvShape g = s;
  g.in_channels = s.in_channels / groups;
  g.out_channels = s.out_channels / groups;
  return g;
}

constexpr std::int64_t kManyPositions = 256;

// A convolution's shape and groups as trace parameters (docs/dispute.md).
std::array<trace::Param, 19> conv_params(const ConvShape& s, std::int64_t groups) {
  return {trace::integer("batch", s.batch),
          trace::integer("in_channels", s.in_channels),
          trace::integer("out_channels", s.out_channels),
          trace::integer("groups", groups),
          trace::integer("in_d", s.in[0]),
          trace::integer("in_h", s.in[1]),
          trace::integer("in_w", s.in[2]),
          trace::integer("kernel_d", s.kernel[0]),
          trace::integer("kernel_h", s.kernel[1]),
          trace::integer("kernel_w", s.kernel[2]),
          trace::integer("stride_d", s.stride[0]),
          trace::integer("stride_h", s.stride[1]),
          trace::integer("stride_w", s.stride[2]),
          trace::integer("padding_d", s.padding[0]),
          trace::integer("padding_h", s.padding[1]),
          trace::integer("padding_w", s.padding[2]),
          trace::integer("dilation_d", s.dilation[0]),
          trace::integer("dilation_h", s.dilation[1]),
          trace::integer("dilation_w", s.dilation[2])};
}

// Few positions an example: the grid path's products per example would be a few columns wide.
// (The column path indexes an input channel with 32 bits.)
bool few_positions(const ConvShape& s) {
  return s.out_positions() < kManyPositions && s.in_positions() < (std::int64_t{1} << 31);
}

}  // namespace

void conv_forward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y) {
  if (s.dilated()) return dilated_conv_forward(s, x, w, bias, y);
  if (few_positions(s)) return column_conv_forward(s, x, w, bias, y);
  grid_conv_forward(s, x, w, bias, y);
}

void conv_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx,
                   float* dw, float* dbias) {
  if (s.dilated()) return dilated_conv_backward(s, x, w, dy, dx, dw, dbias);
  if (few_positions(s)) return column_conv_backward(s, x, w, dy, dx, dw, dbias);
  grid_conv_backward(s, x, w, dy, dx, dw, dbias);
}

namespace {

void grouped_conv_forward_untraced(const ConvShape& s, std::int64_t groups, const float* x,
                                   const float* w, const float* bias, float* y) {
  if (groups == 1) return conv_forward(s, x, w, bias, y);
  if (is_depthwise(s, groups)) return depthwise_conv_forward(s, x, w, bias, y);
  const ConvShape g = group_shape(s, groups);
  const std::int64_t in_p = s.in_positions(), out_p = s.out_positions();
  std::vector<float> xg(static_cast<std::size_t>(s.batch * g.in_channels * in_p));
  std::vector<float> yg(static_cast<std::size_t>(s.batch * g.out_channels * out_p));
  for (std::int64_t k = 0; k < groups; ++k) {
    gather_channels(x, s.batch, s.in_channels, in_p, k * g.in_channels, g.in_channels, xg.data());
    conv_forward(g, xg.data(), w + k * g.out_channels * g.rows(),
                 bias != nullptr ? bias + k * g.out_channels : nullptr, yg.data());
    scatter_channels(yg.data(), s.batch, s.out_channels, out_p, k * g.out_channels, g.out_channels,
                     y);
  }
}

void grouped_conv_backward_untraced(const ConvShape& s, std::int64_t groups, const float* x,
                                    const float* w, const float* dy, float* dx, float* dw,
                                    float* dbias) {
  if (groups == 1) return conv_backward(s, x, w, dy, dx, dw, dbias);
  if (is_depthwise(s, groups)) return depthwise_conv_backward(s, x, w, dy, dx, dw, dbias);
  const ConvShape g = group_shape(s, groups);
  const std::int64_t in_p = s.in_positions(), out_p = s.out_positions();
  std::vector<float> xg(static_cast<std::size_t>(s.batch * g.in_channels * in_p));
  std::vector<float> dxg(xg.size());
  std::vector<float> dyg(static_cast<std::size_t>(s.batch * g.out_channels * out_p));
  for (std::int64_t k = 0; k < groups; ++k) {
    if (dw != nullptr)
      gather_channels(x, s.batch, s.in_channels, in_p, k * g.in_channels, g.in_channels, xg.data());
    gather_channels(dy, s.batch, s.out_channels, out_p, k * g.out_channels, g.out_channels,
                    dyg.data());
    conv_backward(g, xg.data(), w + k * g.out_channels * g.rows(), dyg.data(),
                  dx != nullptr ? dxg.data() : nullptr,
                  dw != nullptr ? dw + k * g.out_channels * g.rows() : nullptr,
                  dbias != nullptr ? dbias + k * g.out_channels : nullptr);
    if (dx != nullptr)
      scatter_channels(dxg.data(), s.batch, s.in_channels, in_p, k * g.in_channels, g.in_channels,
                       dx);
  }
}

}  // namespace

void grouped_conv_forward(const ConvShape& s, std::int64_t groups, const float* x, const float* w,
                          const float* bias, float* y) {
  const std::int64_t x_count = s.batch * s.in_channels * s.in_positions();
  const std::int64_t y_count = s.batch * s.out_channels * s.out_positions();
  const std::int64_t w_count = s.out_channels * (s.in_channels / groups) * s.taps();
  const auto params = conv_params(s, groups);
  const trace::Operand inputs[] = {trace::f32("x", x, x_count), trace::f32("w", w, w_count),
                                   trace::f32_or_none("bias", bias, s.out_channels)};
  trace::Call traced("conv", params, inputs);
  grouped_conv_forward_untraced(s, groups, x, w, bias, y);
  traced.outputs({trace::f32("y", y, y_count)});
}

void grouped_conv_backward(const ConvShape& s, std::int64_t groups, const float* x, const float* w,
                           const float* dy, float* dx, float* dw, float* dbias) {
  const std::int64_t x_count = s.batch * s.in_channels * s.in_positions();
  const std::int64_t y_count = s.batch * s.out_channels * s.out_positions();
  const std::int64_t w_count = s.out_channels * (s.in_channels / groups) * s.taps();
  const auto params = conv_params(s, groups);
  const trace::Operand inputs[] = {trace::f32_or_none("x", x, x_count), trace::f32("w", w, w_count),
                                   trace::f32("dy", dy, y_count)};
  trace::Call traced("conv_backward", params, inputs);
  grouped_conv_backward_untraced(s, groups, x, w, dy, dx, dw, dbias);
  traced.outputs({trace::f32_or_none("dx", dx, x_count), trace::f32_or_none("dw", dw, w_count),
                  trace::f32_or_none("dbias", dbias, s.out_channels)});
}

void conv_transpose_forward(const ConvShape& s, std::int64_t groups, const float* x, const float* w,
                            const float* bias, float* y) {
  grouped_conv_backward(s, groups, nullptr, w, x, y, nullptr, nullptr);
  if (bias == nullptr) return;
  const std::int64_t positions = s.in_positions();
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t c = 0; c < s.in_channels; ++c) {
      float* row = y + (b * s.in_channels + c) * positions;
      for (std::int64_t p = 0; p < positions; ++p) row[p] = row[p] + bias[c];
    }
  }
}

void conv_transpose_backward(const ConvShape& s, std::int64_t groups, const float* x,
                             const float* w, const float* dy, float* dx, float* dw, float* dbias) {
  if (dx != nullptr) grouped_conv_forward(s, groups, dy, w, nullptr, dx);
  if (dw != nullptr) grouped_conv_backward(s, groups, dy, w, x, nullptr, dw, nullptr);
  if (dbias == nullptr) return;
  const std::int64_t positions = s.in_positions();
  for (std::int64_t c = 0; c < s.in_channels; ++c) {
    float sum = 0.0f;
    for (std::int64_t b = 0; b < s.batch; ++b) {
      const float* row = dy + (b * s.in_channels + c) * positions;
      for (std::int64_t p = 0; p < positions; ++p) sum = sum + row[p];
    }
    dbias[c] = sum;
  }
}

}  // namespace vt::kernels
