// Convolutions as matrix products over column matrices (conv.h). The column matrix is built a
// tile at a time, sized to stay in the cache while its product runs; tiles are cut along
// dimensions that no chain runs over, or, where one does (dw's chain over positions), visited in
// the chain's own order with the product continuing from C. So the tiling changes no bit.
#include "kernels/conv.h"

#include <algorithm>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/parallel.h"

namespace vt::kernels {
namespace {

constexpr std::int64_t kPositionTile = 256;  // output positions per column tile
constexpr std::int64_t kRowTile = 64;        // column-matrix rows per dw tile
constexpr std::int64_t kChannelTile = 8;     // input channels per dx tile

// The output columns j whose input column j·stride + shift lies in [0, width): [lo, hi).
void valid_columns(std::int64_t out, std::int64_t stride, std::int64_t shift, std::int64_t width,
                   std::int64_t& lo, std::int64_t& hi) {
  lo = shift >= 0 ? 0 : (-shift + stride - 1) / stride;
  hi = width - 1 - shift < 0 ? 0 : (width - 1 - shift) / stride + 1;
  hi = std::min(hi, out);
  lo = std::min(lo, hi);
}

// Data movement that runs often enough to deserve the widest registers the CPU has: copies and
// single additions per element, whose bits no instruction set changes.
#if defined(__x86_64__)
#define VT_WIDE_COPIES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define VT_WIDE_COPIES
#endif

// Rows [q0, q1) and positions [p0, p1) of example x's column matrix into out (row r at
// out + (q − q0)·ld, position p at column p − p0). Only data moves here.
VT_WIDE_COPIES void im2col(const ConvShape& s, const float* x, std::int64_t q0, std::int64_t q1,
                           std::int64_t p0, std::int64_t p1, float* out, std::int64_t ld) {
  const std::int64_t oh = s.out(1), ow = s.out(2);
  const std::int64_t first_row = p0 / ow, first_j = p0 % ow;
  for (std::int64_t q = q0; q < q1; ++q) {
    const std::int64_t v = q % s.kernel[2];
    const std::int64_t u = q / s.kernel[2] % s.kernel[1];
    const std::int64_t t = q / (s.kernel[2] * s.kernel[1]) % s.kernel[0];
    const float* plane = x + q / s.taps() * s.in_positions();
    std::int64_t lo = 0, hi = 0;
    valid_columns(ow, s.stride[2], v - s.padding[2], s.in[2], lo, hi);
    float* __restrict dst = out + (q - q0) * ld - first_j;
    std::int64_t z = first_row / oh, i = first_row % oh, j0 = first_j;
    for (std::int64_t p = p0; p < p1; dst += ow, j0 = 0) {
      const std::int64_t j1 = std::min(ow, j0 + (p1 - p));
      const std::int64_t zz = z * s.stride[0] + t - s.padding[0];
      const std::int64_t ii = i * s.stride[1] + u - s.padding[1];
      if (zz < 0 || zz >= s.in[0] || ii < 0 || ii >= s.in[1]) {
        for (std::int64_t j = j0; j < j1; ++j) dst[j] = 0.0f;
      } else {
        const float* __restrict src = plane + (zz * s.in[1] + ii) * s.in[2] + (v - s.padding[2]);
        const std::int64_t a = std::clamp(lo, j0, j1), b = std::clamp(hi, j0, j1);
        for (std::int64_t j = j0; j < a; ++j) dst[j] = 0.0f;
        if (s.stride[2] == 1) {
          for (std::int64_t j = a; j < b; ++j) dst[j] = src[j];
        } else {
          for (std::int64_t j = a; j < b; ++j) dst[j] = src[j * s.stride[2]];
        }
        for (std::int64_t j = b; j < j1; ++j) dst[j] = 0.0f;
      }
      p += j1 - j0;
      if (++i == oh) {
        i = 0;
        ++z;
      }
    }
  }
}

// Input channels [c0, c1) of dx from their rows of dcol (row (c − c0, tap) at
// dcol + ((c − c0)·taps + tap)·ld): each input position + the columns that read it, taps in
// order.
VT_WIDE_COPIES void col2im(const ConvShape& s, const float* dcol, std::int64_t ld, std::int64_t c0,
                           std::int64_t c1, float* dx) {
  const std::int64_t od = s.out(0), oh = s.out(1), ow = s.out(2);
  for (std::int64_t c = c0; c < c1; ++c) {
    float* plane = dx + c * s.in_positions();
    std::fill(plane, plane + s.in_positions(), 0.0f);
    for (std::int64_t tap = 0; tap < s.taps(); ++tap) {
      const std::int64_t v = tap % s.kernel[2];
      const std::int64_t u = tap / s.kernel[2] % s.kernel[1];
      const std::int64_t t = tap / (s.kernel[2] * s.kernel[1]);
      std::int64_t lo = 0, hi = 0;
      valid_columns(ow, s.stride[2], v - s.padding[2], s.in[2], lo, hi);
      const float* row = dcol + ((c - c0) * s.taps() + tap) * ld;
      for (std::int64_t z = 0; z < od; ++z) {
        const std::int64_t zz = z * s.stride[0] + t - s.padding[0];
        if (zz < 0 || zz >= s.in[0]) continue;
        for (std::int64_t i = 0; i < oh; ++i) {
          const std::int64_t ii = i * s.stride[1] + u - s.padding[1];
          if (ii < 0 || ii >= s.in[1]) continue;
          const float* in = row + (z * oh + i) * ow;
          float* out = plane + (zz * s.in[1] + ii) * s.in[2] + (v - s.padding[2]);
          if (s.stride[2] == 1) {
            float* __restrict o = out;
            const float* __restrict g = in;
            for (std::int64_t j = lo; j < hi; ++j) o[j] = o[j] + g[j];
          } else {
            for (std::int64_t j = lo; j < hi; ++j)
              out[j * s.stride[2]] = out[j * s.stride[2]] + in[j];
          }
        }
      }
    }
  }
}

// dst (cols × rows, leading dimension ld_dst) = srcᵀ for a rows × cols src (leading dimension
// ld_src), in 8 × 8 tiles so that both sides stay in the cache.
VT_WIDE_COPIES void transpose(std::int64_t rows, std::int64_t cols, const float* src,
                              std::int64_t ld_src, float* dst, std::int64_t ld_dst) {
  constexpr std::int64_t kTile = 8;
  for (std::int64_t r0 = 0; r0 < rows; r0 += kTile) {
    for (std::int64_t c0 = 0; c0 < cols; c0 += kTile) {
      for (std::int64_t r = r0; r < std::min(rows, r0 + kTile); ++r) {
        for (std::int64_t c = c0; c < std::min(cols, c0 + kTile); ++c)
          dst[c * ld_dst + r] = src[r * ld_src + c];
      }
    }
  }
}

// A buffer of this thread's, kept for its next call: no allocation, page faults or zero fill
// per tile (every element is written before it is read).
float* scratch(int which, std::int64_t floats) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& b = buffers[which];
  if (static_cast<std::int64_t>(b.size()) < floats) b.resize(static_cast<std::size_t>(floats));
  return b.data();
}

}  // namespace

void conv_forward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y) {
  const std::int64_t positions = s.out_positions(), rows = s.rows();
  const std::int64_t tiles = (positions + kPositionTile - 1) / kPositionTile;
  // Threads take (example, position tile) pairs; each output's chain runs over all rows q
  // within one tile's product.
  parallel_for(s.batch * tiles, 1, [&](std::int64_t begin, std::int64_t end) {
    float* col = scratch(0, rows * kPositionTile);
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t b = item / tiles, p0 = item % tiles * kPositionTile;
      const std::int64_t np = std::min(kPositionTile, positions - p0);
      im2col(s, x + b * s.in_channels * s.in_positions(), 0, rows, p0, p0 + np, col, np);
      float* out = y + b * s.out_channels * positions + p0;
      gemm(s.out_channels, np, rows, {w, rows, 1}, {col, np, 1}, out, positions);
      if (bias == nullptr) continue;
      for (std::int64_t o = 0; o < s.out_channels; ++o) {
        for (std::int64_t p = 0; p < np; ++p)
          out[o * positions + p] = out[o * positions + p] + bias[o];
      }
    }
  });
}

void conv_backward(const ConvShape& s, const float* x, const float* w, const float* dy, float* dx,
                   float* dw, float* dbias) {
  const std::int64_t positions = s.out_positions(), rows = s.rows();
  if (dw != nullptr) {
    // dw[o][q]: one chain over (b, then p); threads split q, and each visits the examples and
    // position tiles in that order, the product continuing from dw.
    parallel_for((rows + kRowTile - 1) / kRowTile, 1, [&](std::int64_t begin, std::int64_t end) {
      float* col = scratch(0, kRowTile * kPositionTile);
      float* col_t = scratch(1, kRowTile * kPositionTile);
      for (std::int64_t q0 = begin * kRowTile; q0 < std::min(rows, end * kRowTile);
           q0 += kRowTile) {
        const std::int64_t nq = std::min(kRowTile, rows - q0);
        for (std::int64_t b = 0; b < s.batch; ++b) {
          for (std::int64_t p0 = 0; p0 < positions; p0 += kPositionTile) {
            const std::int64_t np = std::min(kPositionTile, positions - p0);
            im2col(s, x + b * s.in_channels * s.in_positions(), q0, q0 + nq, p0, p0 + np, col, np);
            transpose(nq, np, col, np, col_t, nq);
            gemm(s.out_channels, nq, np, {dy + b * s.out_channels * positions + p0, positions, 1},
                 {col_t, nq, 1}, dw + q0, rows, /*accumulate=*/b > 0 || p0 > 0);
          }
        }
      }
    });
  }
  if (dx != nullptr) {
    // dcol[q][p] = chain over o of w[o][q]·dy[b][o][p], a group of input channels at a time,
    // then those channels of dx from it.
    const std::int64_t groups = (s.in_channels + kChannelTile - 1) / kChannelTile;
    parallel_for(s.batch * groups, 1, [&](std::int64_t begin, std::int64_t end) {
      float* dcol = scratch(0, kChannelTile * s.taps() * positions);
      for (std::int64_t item = begin; item < end; ++item) {
        const std::int64_t b = item / groups, c0 = item % groups * kChannelTile;
        const std::int64_t c1 = std::min(s.in_channels, c0 + kChannelTile);
        const std::int64_t q0 = c0 * s.taps(), nq = (c1 - c0) * s.taps();
        gemm(nq, positions, s.out_channels, {w + q0, 1, rows},
             {dy + b * s.out_channels * positions, positions, 1}, dcol, positions);
        col2im(s, dcol, positions, c0, c1, dx + b * s.in_channels * s.in_positions());
      }
    });
  }
  if (dbias == nullptr) return;
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
