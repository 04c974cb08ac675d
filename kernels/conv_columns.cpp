// Convolutions whose examples have few output positions (a CNN's deep layers on small images:
// 8 × 8 down to 1 × 1) as a few large products over the column matrix of many examples at once,
// built explicitly. Example by example, such a product has a handful of columns (a micro-kernel
// tile mostly computed in vain) and, for dw, a chain of a few positions per call; side by side,
// a chunk of examples is one product of thousands. The columns are (b, p) in order, so dw's chain
// over (b, then p) is the product's own chain over k, continued from C chunk after chunk, and
// every other chain runs over q or o within one column: the bits are conv.h's.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/conv_grid.h"
#include "kernels/conv_paths.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "kernels/wide.h"

namespace vt::kernels {
namespace {

constexpr std::int64_t kChunkFloats = std::int64_t{1} << 20;  // column matrix per chunk (4 MiB)

// Examples per chunk: as many as kChunkFloats holds, the batch split evenly (28 and 4 of 32
// would leave the last product a sliver).
std::int64_t examples_per_chunk(const ConvShape& s) {
  const std::int64_t most =
      std::clamp<std::int64_t>(kChunkFloats / (s.rows() * s.out_positions()), 1, s.batch);
  const std::int64_t chunks = (s.batch + most - 1) / most;
  return (s.batch + chunks - 1) / chunks;
}

// Which input position of its channel each output position p reads through each tap:
// reads[tap·P + p], or −1 in the padding. Computed once a call, it turns every row of the column
// matrix into a gather of P values, whatever the stride and however few the positions a row.
std::vector<std::int32_t> tap_reads(const ConvShape& s) {
  const std::int64_t positions = s.out_positions(), oh = s.out(1), ow = s.out(2);
  std::vector<std::int32_t> reads(static_cast<std::size_t>(s.taps() * positions));
  for (std::int64_t tap = 0; tap < s.taps(); ++tap) {
    const std::int64_t v = tap % s.kernel[2], u = tap / s.kernel[2] % s.kernel[1];
    const std::int64_t t = tap / (s.kernel[2] * s.kernel[1]);
    for (std::int64_t p = 0; p < positions; ++p) {
      const std::int64_t j = p % ow, i = p / ow % oh, z = p / (ow * oh);
      const std::int64_t zz = z * s.stride[0] + t - s.padding[0];
      const std::int64_t ii = i * s.stride[1] + u - s.padding[1];
      const std::int64_t jj = j * s.stride[2] + v - s.padding[2];
      const bool inside =
          zz >= 0 && zz < s.in[0] && ii >= 0 && ii < s.in[1] && jj >= 0 && jj < s.in[2];
      reads[static_cast<std::size_t>(tap * positions + p)] =
          inside ? static_cast<std::int32_t>((zz * s.in[1] + ii) * s.in[2] + jj) : -1;
    }
  }
  return reads;
}

// Rows [q0, q1) of the column matrix of examples [b0, b1): col[q·n + (b − b0)·P + p], with n =
// (b1 − b0)·P; +0.0 where the entry lies in the padding.
VT_WIDE void column_rows(const ConvShape& s, const std::int32_t* reads, const float* x,
                         std::int64_t b0, std::int64_t b1, std::int64_t q0, std::int64_t q1,
                         float* col) {
  const std::int64_t positions = s.out_positions(), n = (b1 - b0) * positions;
  for (std::int64_t q = q0; q < q1; ++q) {
    const std::int32_t* __restrict from = reads + q % s.taps() * positions;
    for (std::int64_t b = b0; b < b1; ++b) {
      const float* __restrict xc = x + (b * s.in_channels + q / s.taps()) * s.in_positions();
      float* __restrict to = col + q * n + (b - b0) * positions;
      for (std::int64_t p = 0; p < positions; ++p) {  // branch-free: a vector gather
        const std::int32_t at = from[p];
        const float value = xc[std::max(at, 0)];
        to[p] = at >= 0 ? value : 0.0f;
      }
    }
  }
}

void build_columns(const ConvShape& s, const std::vector<std::int32_t>& reads, const float* x,
                   std::int64_t b0, std::int64_t b1, float* col) {
  parallel_for(s.rows(), 8, [&](std::int64_t begin, std::int64_t end) {
    column_rows(s, reads.data(), x, b0, b1, begin, end, col);
  });
}

// dy of examples [b0, b1) as [O][(b − b0)·P + p]: the layout of the column matrix's columns.
void by_channel(const ConvShape& s, const float* dy, std::int64_t b0, std::int64_t b1,
                float* dy_o) {
  const std::int64_t out = s.out_channels, positions = s.out_positions();
  const std::int64_t n = (b1 - b0) * positions;
  parallel_for((b1 - b0) * out, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t b = b0 + item / out, o = item % out;
      std::copy(dy + (b * out + o) * positions, dy + (b * out + o + 1) * positions,
                dy_o + o * n + (b - b0) * positions);
    }
  });
}

// A buffer of the calling thread's that outlives the parallel bodies it hands out.
float* buffer(std::vector<float>& v, std::int64_t floats) {
  if (static_cast<std::int64_t>(v.size()) < floats) v.resize(static_cast<std::size_t>(floats));
  return v.data();
}

}  // namespace

void column_conv_forward(const ConvShape& s, const float* x, const float* w, const float* bias,
                         float* y) {
  const std::int64_t positions = s.out_positions(), rows = s.rows(), out = s.out_channels;
  const std::int64_t chunk = examples_per_chunk(s);
  thread_local std::vector<float> col_buffer, y_buffer;
  float* col = buffer(col_buffer, rows * chunk * positions);
  float* product = buffer(y_buffer, out * chunk * positions);
  const std::vector<std::int32_t> reads = tap_reads(s);
  for (std::int64_t b0 = 0; b0 < s.batch; b0 += chunk) {
    const std::int64_t b1 = std::min(s.batch, b0 + chunk), n = (b1 - b0) * positions;
    build_columns(s, reads, x, b0, b1, col);
    gemm(out, n, rows, {w, rows, 1}, {col, n, 1}, product, n);
    parallel_for((b1 - b0) * out, 16, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t item = begin; item < end; ++item) {
        const std::int64_t b = item / out, o = item % out;
        const float* from = product + o * n + b * positions;
        float* to = y + ((b0 + b) * out + o) * positions;
        if (bias == nullptr) {
          std::copy(from, from + positions, to);
        } else {
          for (std::int64_t p = 0; p < positions; ++p) to[p] = from[p] + bias[o];
        }
      }
    });
  }
}

void column_conv_backward(const ConvShape& s, const float* x, const float* w, const float* dy,
                          float* dx, float* dw, float* dbias) {
  const std::int64_t positions = s.out_positions(), rows = s.rows(), out = s.out_channels;
  const std::int64_t chunk = examples_per_chunk(s);
  thread_local std::vector<float> col_buffer, dy_buffer, dw_buffer;
  if (dw != nullptr) {
    // One chain over (b, p) either way round: dw = dy · colᵀ when a chunk has fewer columns than
    // there are output channels (the deep layers: packing the column matrix then moves less
    // than transposing dw would), else dwᵀ = col · dyᵀ, transposed at the end.
    const bool direct = chunk * positions < out;
    float* col = buffer(col_buffer, rows * chunk * positions);
    float* dy_copy = buffer(dy_buffer, chunk * positions * out);
    float* dw_t = direct ? nullptr : buffer(dw_buffer, rows * out);
    const std::vector<std::int32_t> reads = tap_reads(s);
    for (std::int64_t b0 = 0; b0 < s.batch; b0 += chunk) {
      const std::int64_t b1 = std::min(s.batch, b0 + chunk), n = (b1 - b0) * positions;
      build_columns(s, reads, x, b0, b1, col);
      if (direct) {
        by_channel(s, dy, b0, b1, dy_copy);
        gemm(out, rows, n, {dy_copy, n, 1}, {col, 1, n}, dw, rows, /*accumulate=*/b0 > 0);
        continue;
      }
      parallel_for(b1 - b0, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t b = begin; b < end; ++b)
          transpose(out, positions, dy + (b0 + b) * out * positions, positions,
                    dy_copy + b * positions * out, out);
      });
      gemm(rows, out, n, {col, n, 1}, {dy_copy, out, 1}, dw_t, out, /*accumulate=*/b0 > 0);
    }
    if (!direct) {
      parallel_for((rows + 63) / 64, 1, [&](std::int64_t begin, std::int64_t end) {
        const std::int64_t q0 = begin * 64, q1 = std::min(rows, end * 64);
        transpose(q1 - q0, out, dw_t + q0 * out, out, dw + q0, rows);
      });
    }
  }
  if (dx != nullptr && dx_is_transposed_convolution(s)) {
    dx_by_transposed_convolution(s, w, dy, dx);
  } else if (dx != nullptr) {
    // dcol[q][(b, p)] = chain over o of w[o][q]·dy[b][o][p], then added into dx tap by tap.
    float* dcol = buffer(col_buffer, rows * chunk * positions);
    float* dy_o = buffer(dy_buffer, out * chunk * positions);
    for (std::int64_t b0 = 0; b0 < s.batch; b0 += chunk) {
      const std::int64_t b1 = std::min(s.batch, b0 + chunk), n = (b1 - b0) * positions;
      by_channel(s, dy, b0, b1, dy_o);
      gemm(rows, n, out, {w, 1, rows}, {dy_o, n, 1}, dcol, n);
      parallel_for((b1 - b0) * s.in_channels, 1, [&](std::int64_t begin, std::int64_t end) {
        for (std::int64_t item = begin; item < end; ++item) {
          const std::int64_t b = item / s.in_channels, c = item % s.in_channels;
          add_columns(s, dcol + c * s.taps() * n + b * positions, n,
                      dx + ((b0 + b) * s.in_channels + c) * s.in_positions());
        }
      });
    }
  }
  if (dbias != nullptr) bias_gradient(s, dy, dbias);
}

}  // namespace vt::kernels
