// The grid and copies conv_grid.h describes.
#include "kernels/conv_grid.h"

#include <algorithm>

#include "kernels/conv_paths.h"
#include "kernels/parallel.h"
#include "kernels/wide.h"

namespace vt::kernels {
namespace {

// transpose in 8 × 8 tiles, so that both sides stay in the cache.
typedef float Row8 __attribute__((vector_size(8 * sizeof(float))));

// An 8 × 8 block in three rounds of two-input shuffles (pairs, then quads, then halves).
__attribute__((always_inline)) inline void transpose8(const float* src, std::int64_t ld_src,
                                                      float* dst, std::int64_t ld_dst) {
  Row8 r[8], t[8], u[8];
  for (int i = 0; i < 8; ++i) __builtin_memcpy(&r[i], src + i * ld_src, sizeof(Row8));
  for (int i = 0; i < 8; i += 2) {
    t[i] = __builtin_shufflevector(r[i], r[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
    t[i + 1] = __builtin_shufflevector(r[i], r[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
  }
  for (int i = 0; i < 8; i += 4) {
    u[i] = __builtin_shufflevector(t[i], t[i + 2], 0, 1, 8, 9, 4, 5, 12, 13);
    u[i + 1] = __builtin_shufflevector(t[i], t[i + 2], 2, 3, 10, 11, 6, 7, 14, 15);
    u[i + 2] = __builtin_shufflevector(t[i + 1], t[i + 3], 0, 1, 8, 9, 4, 5, 12, 13);
    u[i + 3] = __builtin_shufflevector(t[i + 1], t[i + 3], 2, 3, 10, 11, 6, 7, 14, 15);
  }
  for (int i = 0; i < 4; ++i) {
    const Row8 low = __builtin_shufflevector(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
    const Row8 high = __builtin_shufflevector(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    __builtin_memcpy(dst + i * ld_dst, &low, sizeof(Row8));
    __builtin_memcpy(dst + (i + 4) * ld_dst, &high, sizeof(Row8));
  }
}

VT_WIDE void wide_transpose(std::int64_t rows, std::int64_t cols, const float* src,
                            std::int64_t ld_src, float* dst, std::int64_t ld_dst) {
  constexpr std::int64_t kTile = 8;
  for (std::int64_t r0 = 0; r0 < rows; r0 += kTile) {
    for (std::int64_t c0 = 0; c0 < cols; c0 += kTile) {
      if (r0 + kTile <= rows && c0 + kTile <= cols) {
        transpose8(src + r0 * ld_src + c0, ld_src, dst + c0 * ld_dst + r0, ld_dst);
        continue;
      }
      for (std::int64_t r = r0; r < std::min(rows, r0 + kTile); ++r) {
        for (std::int64_t c = c0; c < std::min(cols, c0 + kTile); ++c)
          dst[c * ld_dst + r] = src[r * ld_src + c];
      }
    }
  }
}

}  // namespace

float* scratch(int which, std::int64_t floats) {
  thread_local std::vector<float> buffers[4];
  std::vector<float>& b = buffers[which];
  if (static_cast<std::int64_t>(b.size()) < floats) b.resize(static_cast<std::size_t>(floats));
  return b.data();
}

Grid grid_of(const ConvShape& s) {
  Grid grid;
  for (int d = 0; d < 3; ++d) {
    grid.stride[d] = s.stride[d];
    grid.dims[d] = (s.in[d] + 2 * s.padding[d] + s.stride[d] - 1) / s.stride[d];
  }
  grid.phases = s.stride[0] * s.stride[1] * s.stride[2];
  grid.plane = grid.dims[0] * grid.dims[1] * grid.dims[2];
  grid.example = s.in_channels * grid.phases * grid.plane;
  grid.offsets.resize(static_cast<std::size_t>(s.rows()));
  for (std::int64_t q = 0; q < s.rows(); ++q) {
    const std::int64_t v = q % s.kernel[2], u = q / s.kernel[2] % s.kernel[1];
    const std::int64_t t = q / (s.kernel[2] * s.kernel[1]) % s.kernel[0], c = q / s.taps();
    grid.offsets[static_cast<std::size_t>(q)] = grid.at(c, t, u, v);
  }
  return grid;
}

namespace {

VT_WIDE void wide_fill_channel(const ConvShape& s, const Grid& grid, const float* in,
                               std::int64_t c, float* out) {
  if (grid.phases == 1) {  // stride 1: each grid row written once, padding and values
    float* plane = out + c * grid.plane;
    for (std::int64_t zz = 0; zz < grid.dims[0]; ++zz) {
      for (std::int64_t ii = 0; ii < grid.dims[1]; ++ii) {
        float* __restrict to = plane + (zz * grid.dims[1] + ii) * grid.dims[2];
        const std::int64_t z = zz - s.padding[0], i = ii - s.padding[1];
        if (z < 0 || z >= s.in[0] || i < 0 || i >= s.in[1]) {
          std::fill(to, to + grid.dims[2], 0.0f);
          continue;
        }
        const float* __restrict from = in + (z * s.in[1] + i) * s.in[2];
        std::fill(to, to + s.padding[2], 0.0f);
        for (std::int64_t j = 0; j < s.in[2]; ++j) to[s.padding[2] + j] = from[j];
        std::fill(to + s.padding[2] + s.in[2], to + grid.dims[2], 0.0f);
      }
    }
    return;
  }
  std::fill(out + c * grid.phases * grid.plane, out + (c + 1) * grid.phases * grid.plane, 0.0f);
  for (std::int64_t z = 0; z < s.in[0]; ++z) {
    for (std::int64_t i = 0; i < s.in[1]; ++i) {
      const float* __restrict from = in + (z * s.in[1] + i) * s.in[2];
      const std::int64_t zz = z + s.padding[0], ii = i + s.padding[1];
      // Input column j lands in phase (j + pW) mod sW: one strided run per phase.
      for (std::int64_t jj = s.padding[2]; jj < s.padding[2] + grid.stride[2]; ++jj) {
        float* __restrict to = out + grid.at(c, zz, ii, jj);
        const std::int64_t sw = grid.stride[2];
        for (std::int64_t j = jj - s.padding[2], n = 0; j < s.in[2]; j += sw, ++n) to[n] = from[j];
      }
    }
  }
}

}  // namespace

void fill_channel(const ConvShape& s, const Grid& grid, const float* in, std::int64_t c,
                  float* out) {
  wide_fill_channel(s, grid, in, c, out);
}

void transpose(std::int64_t rows, std::int64_t cols, const float* src, std::int64_t ld_src,
               float* dst, std::int64_t ld_dst) {
  wide_transpose(rows, cols, src, ld_src, dst, ld_dst);
}

// The products read it while it is in the cache.
void fill_example(const ConvShape& s, const Grid& grid, const float* x, std::int64_t b,
                  float* out) {
  for (std::int64_t c = 0; c < s.in_channels; ++c)
    fill_channel(s, grid, x + (b * s.in_channels + c) * s.in_positions(), c, out);
}

namespace {

VT_WIDE void wide_add_columns(const ConvShape& s, const float* dcol, std::int64_t ld_tap,
                              float* dxc) {
  const std::int64_t oh = s.out(1), ow = s.out(2);
  std::fill(dxc, dxc + s.in_positions(), 0.0f);
  for (std::int64_t tap = 0; tap < s.taps(); ++tap) {
    const std::int64_t v = tap % s.kernel[2], u = tap / s.kernel[2] % s.kernel[1];
    const std::int64_t t = tap / (s.kernel[2] * s.kernel[1]);
    const float* row = dcol + tap * ld_tap;
    const std::int64_t j0 = first_reading(0, v, s.stride[2], s.padding[2], ow);
    const std::int64_t j1 = first_reading(s.in[2], v, s.stride[2], s.padding[2], ow);
    const std::int64_t sw = s.stride[2], shift = v - s.padding[2];
    for (std::int64_t z = 0; z < s.out(0); ++z) {
      const std::int64_t zz = z * s.stride[0] + t - s.padding[0];
      if (zz < 0 || zz >= s.in[0]) continue;
      for (std::int64_t i = 0; i < oh; ++i) {
        const std::int64_t ii = i * s.stride[1] + u - s.padding[1];
        if (ii < 0 || ii >= s.in[1]) continue;
        float* __restrict to = dxc + (zz * s.in[1] + ii) * s.in[2];
        const float* __restrict g = row + (z * oh + i) * ow;
        if (sw == 1) {
          for (std::int64_t j = j0; j < j1; ++j) to[j + shift] = to[j + shift] + g[j];
        } else {
          for (std::int64_t j = j0; j < j1; ++j) to[j * sw + shift] = to[j * sw + shift] + g[j];
        }
      }
    }
  }
}

}  // namespace

void add_columns(const ConvShape& s, const float* dcol, std::int64_t ld_tap, float* dxc) {
  wide_add_columns(s, dcol, ld_tap, dxc);
}

namespace {

// Input channels [c0, c1) of dx_by_transposed_convolution's flipped weights; kTaps 0: any.
template <int kTaps>
void flip_block(const ConvShape& s, const float* w, std::int64_t c0, std::int64_t c1,
                float* flipped) {
  const std::int64_t taps = kTaps > 0 ? kTaps : s.taps();
  for (std::int64_t o = 0; o < s.out_channels; ++o) {
    for (std::int64_t c = c0; c < c1; ++c) {
      const float* __restrict from = w + (o * s.in_channels + c) * taps;
      float* __restrict to = flipped + (c * s.out_channels + o) * taps;
      for (std::int64_t tap = 0; tap < taps; ++tap) to[taps - 1 - tap] = from[tap];
    }
  }
}

}  // namespace

bool dx_is_transposed_convolution(const ConvShape& s) {
  for (int d = 0; d < 3; ++d) {
    if (s.stride[d] != 1 || s.padding[d] > s.kernel[d] - 1) return false;
  }
  return true;
}

void dx_by_transposed_convolution(const ConvShape& s, const float* w, const float* dy, float* dx) {
  ConvShape t = s;
  t.in_channels = s.out_channels;
  t.out_channels = s.in_channels;
  for (int d = 0; d < 3; ++d) {
    t.in[d] = s.out(d);
    t.padding[d] = s.kernel[d] - 1 - s.padding[d];
  }
  thread_local std::vector<float> flipped;
  flipped.resize(static_cast<std::size_t>(s.out_channels * s.rows()));
  const std::int64_t taps = s.taps();
  float* const to_all = flipped.data();
  // Blocks of 16 input channels: each o reads one contiguous run of w, written to 16 rows.
  constexpr std::int64_t kBlock = 16;
  parallel_for((s.in_channels + kBlock - 1) / kBlock, 1, [&](std::int64_t begin, std::int64_t end) {
    const std::int64_t c0 = begin * kBlock, c1 = std::min(s.in_channels, end * kBlock);
    switch (taps) {  // the common kernels' taps as constants: the copies unroll
      case 9:
        return flip_block<9>(s, w, c0, c1, to_all);
      case 1:
        return flip_block<1>(s, w, c0, c1, to_all);
      default:
        return flip_block<0>(s, w, c0, c1, to_all);
    }
  });
  conv_forward(t, dy, to_all, nullptr, dx);
}

void bias_gradient(const ConvShape& s, const float* dy, float* dbias) {
  const std::int64_t positions = s.out_positions();
  parallel_for(s.out_channels, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t o = begin; o < end; ++o) {
      float sum = 0.0f;
      for (std::int64_t b = 0; b < s.batch; ++b) {
        const float* row = dy + (b * s.out_channels + o) * positions;
        for (std::int64_t p = 0; p < positions; ++p) sum = sum + row[p];
      }
      dbias[o] = sum;
    }
  });
}

}  // namespace vt::kernels
