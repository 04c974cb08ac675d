// Convolutions as matrix products over column matrices (conv.h) that are never built: every
// product reads its column matrix where it lies in a zero-padded, phase-split copy of the input
// (Grid below), through per-row offsets. Products are tiled along dimensions that no chain runs
// over, or, where one does (dw's chain over positions), visited in the chain's own order with
// the product continuing from C. So the tiling changes no bit.
#include "kernels/conv.h"

#include <algorithm>
#include <vector>

#include "kernels/conv_paths.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "kernels/wide.h"

namespace vt::kernels {
namespace {

constexpr std::int64_t kPositionTile = 256;  // grid positions per forward product
constexpr std::int64_t kRowTile = 96;        // column-matrix rows per dw product
constexpr std::int64_t kChannelTile = 8;     // input channels per strided-dx product

// dst (cols × rows, leading dimension ld_dst) = srcᵀ for a rows × cols src (leading dimension
// ld_src), in 8 × 8 tiles so that both sides stay in the cache.
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

VT_WIDE void transpose(std::int64_t rows, std::int64_t cols, const float* src, std::int64_t ld_src,
                       float* dst, std::int64_t ld_dst) {
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

// A buffer of this thread's, kept for its next call: no allocation, page faults or zero fill
// per tile (every element is written before it is read).
float* scratch(int which, std::int64_t floats) {
  thread_local std::vector<float> buffers[2];
  std::vector<float>& b = buffers[which];
  if (static_cast<std::int64_t>(b.size()) < floats) b.resize(static_cast<std::size_t>(floats));
  return b.data();
}

// The zero-padded input split by stride phase: padded position (zz, ii, jj) lies in phase
// (zz mod sD, ii mod sH, jj mod sW) at (zz / sD, ii / sH, jj / sW) of that phase's Dq × Hq × Wq
// plane. Output (z, i, j) is then p' = (z·Hq + i)·Wq + j in every plane, and row q = (c, t, u, v)
// of its column lies at p' + offset[q], offset[q] = ((c·Φ + phase(t, u, v))·Dq + t / sD)·Hq·Wq +
// (u / sH)·Wq + v / sW (Φ phases; one at stride 1). Along j the columns are contiguous, so they
// are read in place; the values are the column matrix's, +0.0 in the padding included, so every
// chain is conv.h's.
struct Grid {
  std::int64_t stride[3] = {1, 1, 1}, dims[3] = {1, 1, 1};  // Dq, Hq, Wq
  std::int64_t phases = 1, plane = 1, example = 1;          // floats per phase, per example
  std::vector<std::int64_t> offsets;                        // offset[q]

  // Where padded position (zz, ii, jj) of channel c lies (no division at stride 1: this runs
  // once per row of every copy).
  std::int64_t at(std::int64_t c, std::int64_t zz, std::int64_t ii, std::int64_t jj) const {
    const auto split = [](std::int64_t v, std::int64_t by, std::int64_t& phase) {
      phase = by == 1 ? 0 : v % by;
      return by == 1 ? v : v / by;
    };
    std::int64_t pz = 0, pi = 0, pj = 0;
    const std::int64_t z = split(zz, stride[0], pz), i = split(ii, stride[1], pi);
    const std::int64_t j = split(jj, stride[2], pj);
    return (c * phases + (pz * stride[1] + pi) * stride[2] + pj) * plane +
           (z * dims[1] + i) * dims[2] + j;
  }
};

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

// Channel c of one example into its grid: zeros, then every input value where it lies.
VT_WIDE void fill_channel(const ConvShape& s, const Grid& grid, const float* in, std::int64_t c,
                          float* out) {
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

// Example b's grid (all its channels) at `out`: the products read it while it is in the cache.
void fill_example(const ConvShape& s, const Grid& grid, const float* x, std::int64_t b,
                  float* out) {
  for (std::int64_t c = 0; c < s.in_channels; ++c)
    fill_channel(s, grid, x + (b * s.in_channels + c) * s.in_positions(), c, out);
}

// dx of input channels [c0, c1) of one example from their rows of dcol (row (c − c0, tap) at
// dcol + ((c − c0)·taps + tap)·ld): +0.0, then for each tap in order + dcol at every position
// that tap read, added in the grid (where every column lands inside) and read back from it.
VT_WIDE void col2im(const ConvShape& s, const Grid& grid, const float* dcol, std::int64_t ld,
                    std::int64_t c0, std::int64_t c1, float* sums, float* dx) {
  const std::int64_t oh = s.out(1), ow = s.out(2), out_rows = s.out(0) * oh;
  for (std::int64_t c = c0; c < c1; ++c) {
    std::fill(sums, sums + grid.phases * grid.plane, 0.0f);
    for (std::int64_t tap = 0; tap < s.taps(); ++tap) {
      const float* row = dcol + ((c - c0) * s.taps() + tap) * ld;
      float* at = sums + grid.offsets[static_cast<std::size_t>(tap)];
      for (std::int64_t r = 0; r < out_rows; ++r) {
        float* __restrict o = at + (r / oh * grid.dims[1] + r % oh) * grid.dims[2];
        const float* __restrict g = row + r * ow;
        for (std::int64_t j = 0; j < ow; ++j) o[j] = o[j] + g[j];
      }
    }
    float* plane = dx + c * s.in_positions();
    for (std::int64_t z = 0; z < s.in[0]; ++z) {
      for (std::int64_t i = 0; i < s.in[1]; ++i) {
        float* __restrict to = plane + (z * s.in[1] + i) * s.in[2];
        const std::int64_t zz = z + s.padding[0], ii = i + s.padding[1], sw = grid.stride[2];
        for (std::int64_t jj = s.padding[2]; jj < s.padding[2] + sw; ++jj) {
          const float* __restrict from = sums + grid.at(0, zz, ii, jj);
          for (std::int64_t j = jj - s.padding[2], n = 0; j < s.in[2]; j += sw, ++n)
            to[j] = from[n];
        }
      }
    }
  }
}

// dwᵀ[q][o] for rows [q0, q0 + nq), example b's part of the chain over (b, then p), continued
// from dwᵀ: one output row (z, i) per product (its positions lie side by side in the grid at
// `own`), the column matrix the left operand and dyᵀ the right one.
void weight_gradient_rows(const ConvShape& s, const Grid& grid, const float* own, std::int64_t b,
                          const float* dy_t, std::int64_t q0, std::int64_t nq, float* dw_t) {
  const std::int64_t positions = s.out_positions(), out = s.out_channels;
  const std::int64_t oh = s.out(1), ow = s.out(2);
  for (std::int64_t r = 0; r < s.out(0) * oh; ++r) {
    const float* row = own + (r / oh * grid.dims[1] + r % oh) * grid.dims[2];
    gemm(nq, out, ow, {row, 0, 1, grid.offsets.data() + q0},
         {dy_t + (b * positions + r * ow) * out, out, 1}, dw_t + q0 * out, out,
         /*accumulate=*/b > 0 || r > 0);
  }
}

// Whether dx is the transposed convolution of conv.h: stride 1, and padding that leaves the
// transposed one a padding of its own (k − 1 − p ≥ 0).
bool transposed_is_stride_one(const ConvShape& s) {
  for (int d = 0; d < 3; ++d) {
    if (s.stride[d] != 1 || s.padding[d] > s.kernel[d] - 1) return false;
  }
  return true;
}

}  // namespace

// y = the convolution, one product per tile of grid positions p'; the p' with j ≥ OW or i ≥ OH
// are no outputs: computed in vain (2 of every 34 columns at 32 × 32) and dropped.
void undilated_conv_forward(const ConvShape& s, const float* x, const float* w, const float* bias,
                            float* y) {
  const Grid grid = grid_of(s);
  const std::int64_t od = s.out(0), oh = s.out(1), ow = s.out(2), positions = s.out_positions();
  const std::int64_t hq = grid.dims[1], wq = grid.dims[2];
  const std::int64_t span = ((od - 1) * hq + (oh - 1)) * wq + ow;  // last p' + 1
  const std::int64_t tiles = (span + kPositionTile - 1) / kPositionTile;
  // Threads take (example, tile) pairs in order; each fills the grid of the examples it reaches.
  parallel_for(s.batch * tiles, 1, [&](std::int64_t begin, std::int64_t end) {
    float* tile = scratch(0, s.out_channels * kPositionTile);
    float* own = scratch(1, grid.example);
    std::int64_t filled = -1;
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t b = item / tiles, p0 = item % tiles * kPositionTile;
      const std::int64_t n = std::min(kPositionTile, span - p0);
      if (b != filled) fill_example(s, grid, x, b, own);
      filled = b;
      gemm(s.out_channels, n, s.rows(), {w, s.rows(), 1}, {own + p0, 0, 1, grid.offsets.data()},
           tile, n);
      // The outputs among p' in [p0, p0 + n), one grid row at a time.
      for (std::int64_t r = p0 / wq; r * wq < p0 + n; ++r) {
        const std::int64_t z = r / hq, i = r % hq;
        const std::int64_t j0 = std::max(p0 - r * wq, std::int64_t{0});
        const std::int64_t j1 = std::min(ow, p0 + n - r * wq);
        if (i >= oh || j0 >= j1) continue;
        for (std::int64_t o = 0; o < s.out_channels; ++o) {
          const float* from = tile + o * n + r * wq - p0;
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

void undilated_conv_backward(const ConvShape& s, const float* x, const float* w, const float* dy,
                             float* dx, float* dw, float* dbias) {
  const std::int64_t positions = s.out_positions(), rows = s.rows();
  if (dw != nullptr) {
    // dw[o][q] is computed as its transpose, so that the column matrix is read where it lies
    // and only dy, O values per position, moves: threads split q.
    thread_local std::vector<float> buffer, dy_t_buffer, dw_t_buffer;
    const Grid grid = grid_of(s);
    buffer.resize(static_cast<std::size_t>(grid.example));
    dy_t_buffer.resize(static_cast<std::size_t>(s.batch * positions * s.out_channels));
    dw_t_buffer.resize(static_cast<std::size_t>(rows * s.out_channels));
    float* const own = buffer.data();
    float* const dy_t = dy_t_buffer.data();
    float* const dw_t = dw_t_buffer.data();
    const std::int64_t tile_rows = gemm_tile_rows(s.out_channels);
    parallel_for(s.batch, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t b = begin; b < end; ++b) {
        transpose(s.out_channels, positions, dy + b * s.out_channels * positions, positions,
                  dy_t + b * positions * s.out_channels, s.out_channels);
      }
    });
    // Example by example (the chain's order), its grid filled once and read while cached.
    for (std::int64_t b = 0; b < s.batch; ++b) {
      parallel_for(s.in_channels, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t c = begin; c < end; ++c)
          fill_channel(s, grid, x + (b * s.in_channels + c) * s.in_positions(), c, own);
      });
      // Threads split the rows in whole micro-kernel tiles, evenly (144 rows in tiles of 96
      // would leave one thread a third of the work), and each runs its rows kRowTile at a time.
      parallel_for(
          (rows + tile_rows - 1) / tile_rows, 1, [&](std::int64_t begin, std::int64_t end) {
            const std::int64_t last = std::min(rows, end * tile_rows);
            for (std::int64_t q0 = begin * tile_rows; q0 < last; q0 += kRowTile)
              weight_gradient_rows(s, grid, own, b, dy_t, q0, std::min(kRowTile, last - q0), dw_t);
          });
    }
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
    undilated_conv_forward(t, dy, flipped.data(), nullptr, dx);
  } else if (dx != nullptr) {
    // dcol[q][p] = chain over o of w[o][q]·dy[b][o][p], a group of input channels at a time,
    // then those channels of dx from it.
    const std::int64_t groups = (s.in_channels + kChannelTile - 1) / kChannelTile;
    const Grid grid = grid_of(s);
    parallel_for(s.batch * groups, 1, [&](std::int64_t begin, std::int64_t end) {
      float* dcol = scratch(0, kChannelTile * s.taps() * positions);
      float* sums = scratch(1, grid.phases * grid.plane);
      for (std::int64_t item = begin; item < end; ++item) {
        const std::int64_t b = item / groups, c0 = item % groups * kChannelTile;
        const std::int64_t c1 = std::min(s.in_channels, c0 + kChannelTile);
        const std::int64_t q0 = c0 * s.taps(), nq = (c1 - c0) * s.taps();
        gemm(nq, positions, s.out_channels, {w + q0, 1, rows},
             {dy + b * s.out_channels * positions, positions, 1}, dcol, positions);
        col2im(s, grid, dcol, positions, c0, c1, sums, dx + b * s.in_channels * s.in_positions());
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
