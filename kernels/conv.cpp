// Convolutions as matrix products over column matrices (conv.h). The column matrix is built a
// tile at a time, sized to stay in the cache while its product runs; tiles are cut along
// dimensions that no chain runs over, or, where one does (dw's chain over positions), visited in
// the chain's own order with the product continuing from C. So the tiling changes no bit.
#include "kernels/conv.h"

#include <algorithm>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "kernels/wide.h"

namespace vt::kernels {
namespace {

constexpr std::int64_t kPositionTile = 256;  // output positions per column tile
constexpr std::int64_t kRowTile = 96;        // column-matrix rows per dw tile
constexpr std::int64_t kChannelTile = 8;     // input channels per dx tile

// The output columns j whose input column j·stride + shift lies in [0, width): [lo, hi).
void valid_columns(std::int64_t out, std::int64_t stride, std::int64_t shift, std::int64_t width,
                   std::int64_t& lo, std::int64_t& hi) {
  lo = shift >= 0 ? 0 : (-shift + stride - 1) / stride;
  hi = width - 1 - shift < 0 ? 0 : (width - 1 - shift) / stride + 1;
  hi = std::min(hi, out);
  lo = std::min(lo, hi);
}

// Rows [q0, q1) and positions [p0, p1) of example x's column matrix into out (row r at
// out + (q − q0)·ld, position p at column p − p0). Only data moves here.
VT_WIDE void im2col(const ConvShape& s, const float* x, std::int64_t q0, std::int64_t q1,
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
VT_WIDE void col2im(const ConvShape& s, const float* dcol, std::int64_t ld, std::int64_t c0,
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
VT_WIDE void transpose(std::int64_t rows, std::int64_t cols, const float* src, std::int64_t ld_src,
                       float* dst, std::int64_t ld_dst) {
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

// A stride-1 convolution reads its column matrix where it lies in a zero-padded copy of the
// input, and builds none: in the padded grid (Dp × Hp × Wp), output (z, i, j) sits at
// p' = (z·Hp + i)·Wp + j and row q = (c, t, u, v) of its column at p' + offset[q], with
// offset[q] = ((c·Dp + t)·Hp + u)·Wp + v. The values are the column matrix's, +0.0 in the padding
// included, so every chain is conv.h's.
struct Padded {
  std::int64_t dp = 0, hp = 0, wp = 0, plane = 0;
  std::vector<std::int64_t> offsets;  // offset[q]
  float* data = nullptr;              // example b's channel c at data + (b·C + c)·plane

  // Where output row (z, i)'s p' = 0 lies in example b's padded grid.
  const float* row(const ConvShape& s, std::int64_t b, std::int64_t z, std::int64_t i) const {
    return data + b * s.in_channels * plane + (z * hp + i) * wp;
  }
};

bool stride_one(const ConvShape& s) {
  return s.stride[0] == 1 && s.stride[1] == 1 && s.stride[2] == 1;
}

// Whether dx is the transposed convolution of conv.h: stride 1, and padding that leaves the
// transposed one a padding of its own (k − 1 − p ≥ 0).
bool transposed_is_stride_one(const ConvShape& s) {
  for (int d = 0; d < 3; ++d) {
    if (s.padding[d] > s.kernel[d] - 1) return false;
  }
  return stride_one(s);
}

// One input plane into its zero-padded copy.
VT_WIDE void pad_plane(const ConvShape& s, const Padded& grid, const float* in, float* out) {
  std::fill(out, out + grid.plane, 0.0f);
  for (std::int64_t z = 0; z < s.in[0]; ++z) {
    for (std::int64_t i = 0; i < s.in[1]; ++i) {
      const float* __restrict from = in + (z * s.in[1] + i) * s.in[2];
      float* __restrict to =
          out + ((z + s.padding[0]) * grid.hp + i + s.padding[1]) * grid.wp + s.padding[2];
      for (std::int64_t j = 0; j < s.in[2]; ++j) to[j] = from[j];
    }
  }
}

// The padded grid's sizes and the rows' offsets in it.
Padded grid_of(const ConvShape& s) {
  Padded grid;
  grid.dp = s.in[0] + 2 * s.padding[0];
  grid.hp = s.in[1] + 2 * s.padding[1];
  grid.wp = s.in[2] + 2 * s.padding[2];
  grid.plane = grid.dp * grid.hp * grid.wp;
  grid.offsets.resize(static_cast<std::size_t>(s.rows()));
  for (std::int64_t q = 0; q < s.rows(); ++q) {
    const std::int64_t v = q % s.kernel[2], u = q / s.kernel[2] % s.kernel[1];
    const std::int64_t t = q / (s.kernel[2] * s.kernel[1]) % s.kernel[0], c = q / s.taps();
    grid.offsets[static_cast<std::size_t>(q)] = ((c * grid.dp + t) * grid.hp + u) * grid.wp + v;
  }
  return grid;
}

// x's padded copy in `buffer` (the caller's, kept for its next call: the workers see it through
// grid.data, where a thread_local named inside a lambda would be each worker's own).
Padded pad_input(const ConvShape& s, const float* x, std::vector<float>& buffer) {
  Padded grid = grid_of(s);
  buffer.resize(static_cast<std::size_t>(s.batch * s.in_channels * grid.plane));
  grid.data = buffer.data();
  parallel_for(s.batch * s.in_channels, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t bc = begin; bc < end; ++bc)
      pad_plane(s, grid, x + bc * s.in_positions(), grid.data + bc * grid.plane);
  });
  return grid;
}

// The product runs over p' from 0 to the last output; the p' with j ≥ OW or i ≥ OH are no
// outputs: computed in vain (2 of every 34 columns at 32 × 32) and dropped.
void forward_stride1(const ConvShape& s, const float* x, const float* w, const float* bias,
                     float* y) {
  thread_local std::vector<float> buffer;
  const Padded grid = pad_input(s, x, buffer);
  const std::int64_t od = s.out(0), oh = s.out(1), ow = s.out(2), positions = s.out_positions();
  const std::int64_t span = ((od - 1) * grid.hp + (oh - 1)) * grid.wp + ow;  // last p' + 1
  const std::int64_t tiles = (span + kPositionTile - 1) / kPositionTile;
  parallel_for(s.batch * tiles, 1, [&](std::int64_t begin, std::int64_t end) {
    float* tile = scratch(0, s.out_channels * kPositionTile);
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t b = item / tiles, p0 = item % tiles * kPositionTile;
      const std::int64_t n = std::min(kPositionTile, span - p0);
      gemm(s.out_channels, n, s.rows(), {w, s.rows(), 1},
           {grid.row(s, b, 0, 0) + p0, 0, 1, grid.offsets.data()}, tile, n);
      // The outputs among p' in [p0, p0 + n), one grid row at a time.
      for (std::int64_t r = p0 / grid.wp; r * grid.wp < p0 + n; ++r) {
        const std::int64_t z = r / grid.hp, i = r % grid.hp;
        const std::int64_t j0 = std::max(p0 - r * grid.wp, std::int64_t{0});
        const std::int64_t j1 = std::min(ow, p0 + n - r * grid.wp);
        if (i >= oh || j0 >= j1) continue;
        for (std::int64_t o = 0; o < s.out_channels; ++o) {
          const float* from = tile + o * n + r * grid.wp - p0;
          float* to = y + (b * s.out_channels + o) * positions + (z * oh + i) * ow;
          if (bias == nullptr) {
            std::copy(from + j0, from + j1, to + j0);
          } else {
            for (std::int64_t j = j0; j < j1; ++j) to[j] = from[j] + bias[o];
          }
        }
      }
    }
  });
}

// dwᵀ[q][o] for rows [q0, q0 + nq): the chain over (b, then p) continued from dwᵀ, the column
// matrix the product's left operand (read in the padded input for stride 1, built by im2col
// otherwise) and dyᵀ its right one.
void weight_gradient_rows(const ConvShape& s, const float* x, const Padded* grid, const float* dy_t,
                          std::int64_t q0, std::int64_t nq, float* dw_t) {
  const std::int64_t positions = s.out_positions(), out = s.out_channels;
  float* c = dw_t + q0 * out;
  if (grid != nullptr) {  // one output row (z, i) per product: its positions lie side by side
    const std::int64_t oh = s.out(1), ow = s.out(2);
    for (std::int64_t b = 0; b < s.batch; ++b) {
      for (std::int64_t r = 0; r < s.out(0) * oh; ++r) {
        const MatrixRef col{grid->row(s, b, r / oh, r % oh), 0, 1, grid->offsets.data() + q0};
        gemm(nq, out, ow, col, {dy_t + (b * positions + r * ow) * out, out, 1}, c, out,
             /*accumulate=*/b > 0 || r > 0);
      }
    }
    return;
  }
  float* col = scratch(0, nq * kPositionTile);
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t p0 = 0; p0 < positions; p0 += kPositionTile) {
      const std::int64_t np = std::min(kPositionTile, positions - p0);
      im2col(s, x + b * s.in_channels * s.in_positions(), q0, q0 + nq, p0, p0 + np, col, np);
      gemm(nq, out, np, {col, np, 1}, {dy_t + (b * positions + p0) * out, out, 1}, c, out,
           /*accumulate=*/b > 0 || p0 > 0);
    }
  }
}

}  // namespace

void conv_forward(const ConvShape& s, const float* x, const float* w, const float* bias, float* y) {
  if (stride_one(s)) {
    forward_stride1(s, x, w, bias, y);
    return;
  }
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
    // dw[o][q] is computed as its transpose, so that the column matrix is read where it lies
    // (or where im2col writes it) and only dy, O values per position, moves: threads split q.
    thread_local std::vector<float> padded, dy_t_buffer, dw_t_buffer;
    Padded grid;
    if (stride_one(s)) grid = pad_input(s, x, padded);
    dy_t_buffer.resize(static_cast<std::size_t>(s.batch * positions * s.out_channels));
    dw_t_buffer.resize(static_cast<std::size_t>(rows * s.out_channels));
    float* const dy_t = dy_t_buffer.data();
    float* const dw_t = dw_t_buffer.data();
    parallel_for(s.batch, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t b = begin; b < end; ++b) {
        transpose(s.out_channels, positions, dy + b * s.out_channels * positions, positions,
                  dy_t + b * positions * s.out_channels, s.out_channels);
      }
    });
    parallel_for((rows + kRowTile - 1) / kRowTile, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t q0 = begin * kRowTile; q0 < std::min(rows, end * kRowTile);
           q0 += kRowTile) {
        weight_gradient_rows(s, x, stride_one(s) ? &grid : nullptr, dy_t, q0,
                             std::min(kRowTile, rows - q0), dw_t);
      }
    });
    transpose(rows, s.out_channels, dw_t, s.out_channels, dw, rows);
  }
  if (dx != nullptr && transposed_is_stride_one(s)) {
    // dx is itself a stride-1 convolution (conv.h): of dy, by the transposed, flipped weights.
    ConvShape t = s;
    t.in_channels = s.out_channels;
    t.out_channels = s.in_channels;
    for (int d = 0; d < 3; ++d) {
      t.in[d] = s.out(d);
      t.padding[d] = s.kernel[d] - 1 - s.padding[d];
    }
    thread_local std::vector<float> flipped;
    flipped.resize(static_cast<std::size_t>(s.out_channels * rows));
    const std::int64_t taps = s.taps();
    for (std::int64_t o = 0; o < s.out_channels; ++o) {
      for (std::int64_t c = 0; c < s.in_channels; ++c) {
        const float* from = w + (o * s.in_channels + c) * taps;
        float* to = flipped.data() + (c * s.out_channels + o) * taps;
        for (std::int64_t tap = 0; tap < taps; ++tap) to[taps - 1 - tap] = from[tap];
      }
    }
    forward_stride1(t, dy, flipped.data(), nullptr, dx);
  } else if (dx != nullptr) {
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
