#pragma once
// Internal to kernels/: what the convolution paths (conv_paths.h) share — the zero-padded,
// phase-split copy of an input channel that products and depthwise chains read in place, and
// the copies around it. None of it does arithmetic.

#include <cstdint>
#include <vector>

#include "kernels/conv.h"

namespace vt::kernels {

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

Grid grid_of(const ConvShape& s);

// Channel c of one example (`in`, its in_positions() values) into its grid at `out`: zeros,
// then every input value where it lies.
void fill_channel(const ConvShape& s, const Grid& grid, const float* in, std::int64_t c,
                  float* out);

// Example b's grid (all its channels) at `out`.
void fill_example(const ConvShape& s, const Grid& grid, const float* x, std::int64_t b, float* out);

// dst (cols × rows, leading dimension ld_dst) = srcᵀ for a rows × cols src (leading dimension
// ld_src).
void transpose(std::int64_t rows, std::int64_t cols, const float* src, std::int64_t ld_src,
               float* dst, std::int64_t ld_dst);

// dx of one channel of one example (dxc, in_positions() values) in conv.h's dcol form: +0.0,
// then for each tap in order, + dcol at every position that tap read. dcol holds the channel's
// rows, tap 0 first and each next one ld_tap floats on, each out_positions() long.
void add_columns(const ConvShape& s, const float* dcol, std::int64_t ld_tap, float* dxc);

// Whether dx is the transposed convolution of conv.h (stride 1, and padding that leaves the
// transposed one a padding of its own, k − 1 − p ≥ 0), and that convolution, of dy by the
// transposed, flipped weights (groups 1).
bool dx_is_transposed_convolution(const ConvShape& s);
void dx_by_transposed_convolution(const ConvShape& s, const float* w, const float* dy, float* dx);

// dbias[o] = chain over (b, then p) of dy[b, o, p].
void bias_gradient(const ConvShape& s, const float* dy, float* dbias);

// The first output index j ≥ 0 whose tap reads at or past input column `at` (j·stride + tap −
// padding ≥ at), capped at `outputs`: the runs of a column row that read inside the input.
inline std::int64_t first_reading(std::int64_t at, std::int64_t tap, std::int64_t stride,
                                  std::int64_t padding, std::int64_t outputs) {
  const std::int64_t need = at + padding - tap;  // j·stride ≥ need
  const std::int64_t j = need <= 0 ? 0 : (need + stride - 1) / stride;
  return j < outputs ? j : outputs;
}

// A buffer of this thread's (which: 0 … 3), kept for its next call: no allocation, page faults
// or zero fill per tile (the caller writes every element it reads).
float* scratch(int which, std::int64_t floats);

}  // namespace vt::kernels
