// Convolutions as matrix products over column matrices (conv.h) that are never built: every
// product reads its column matrix where it lies in a zero-padded, phase-split copy of the input
// (conv_grid.h), through per-row offsets: the path for examples with many output positions.
// Products are tiled along dimensions that no chain runs over, or, where one does (dw's chain over
// positions), visited in the chain's own order with the product continuing from C. So the tiling
// changes no bit.
#include "kernels/conv.h"

#include <algorithm>
#include <vector>

#include "kernels/conv_grid.h"
#include "kernels/conv_paths.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "kernels/wide.h"

namespace vt::kernels {
namespace {

constexpr std::int64_t kPositionTile = 256;  // grid positions per forward product
constexpr std::int64_t kRowTile = 96;        // column-matrix rows per dw product
constexpr std::int64_t kChannelTile = 8;     // input channels per strided-dx product

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

}  // namespace

// y = the convolution, one product per tile of grid positions p'; the p' with j ≥ OW or i ≥ OH
// are no outputs: computed in vain (2 of every 34 columns at 32 × 32) and dropped.
void grid_conv_forward(const ConvShape& s, const float* x, const float* w, const float* bias,
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

void grid_conv_backward(const ConvShape& s, const float* x, const float* w, const float* dy,
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
  if (dx != nullptr && dx_is_transposed_convolution(s)) {
    dx_by_transposed_convolution(s, w, dy, dx);
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
  if (dbias != nullptr) bias_gradient(s, dy, dbias);
}

}  // namespace vt::kernels
