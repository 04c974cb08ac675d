// The inner loops of a depthwise convolution (conv_depthwise.cpp): product chains as gemm's, one
// chain per output, over a few taps instead of a long k. Included by each gemm_<isa>.cpp right
// after gemm_micro.h, inside its namespace, and built with its flags and helpers (load, store,
// broadcast, fused): the multiply-adds stay where kernels_fuse_only_in_products looks for them.
// No include guard, as gemm_micro.h.

#ifndef VT_GEMM_NAMESPACE
#error "include after gemm_micro.h, with its macros still defined"
#endif

#include <algorithm>

namespace vt::kernels::VT_GEMM_NAMESPACE {
namespace {

// out[r·ld_out + j] = chain over tap of w[tap] · in[offsets[tap] + r·ld_in + j], from +0.0, for
// r < rows and j < width rounded up to whole vectors (the caller's rows are readable and
// writable that far). The operands are gemm's: w broadcast, `in` the right-hand side, so each
// value is the one the product of a 1-row weight by the column matrix gives.
void depthwise_tap_chains(std::int64_t rows, std::int64_t width, std::int64_t taps, const float* w,
                          const float* in, const std::int64_t* offsets, std::int64_t ld_in,
                          float* out, std::int64_t ld_out) {
  constexpr int kBlock = 4;  // independent chains in flight
  for (std::int64_t r = 0; r < rows; ++r) {
    const float* row = in + r * ld_in;
    float* to = out + r * ld_out;
    std::int64_t j = 0;
    for (; j + kBlock * kW <= width; j += kBlock * kW) {
      Vec acc[kBlock] = {};
      for (std::int64_t tap = 0; tap < taps; ++tap) {
        const Vec wv = broadcast(w[tap]);
        const float* at = row + offsets[tap] + j;
        for (int v = 0; v < kBlock; ++v) acc[v] = fused(wv, load(at + v * kW), acc[v]);
      }
      for (int v = 0; v < kBlock; ++v) store(to + j + v * kW, acc[v]);
    }
    for (; j < width; j += kW) {
      Vec acc = {};
      for (std::int64_t tap = 0; tap < taps; ++tap)
        acc = fused(broadcast(w[tap]), load(row + offsets[tap] + j), acc);
      store(to + j, acc);
    }
  }
}

// The weight gradient over channels held side by side (channels-last), kW channels a vector:
// dw_t[tap·ld_dw + c] = chain over n < count of x[starts[n] + offsets[tap] + c] · dy[n·ld_dy + c],
// continued from dw_t (load) or from +0.0, for tap < taps and c < channels rounded up to whole
// vectors. The operands are gemm's for the transposed weight gradient (the column matrix's
// entry broadcast there, dyᵀ the right-hand side): fused(x, dy, acc) lane by lane.
template <int kTaps>
void depthwise_weight_block(std::int64_t count, std::int64_t channels, const float* x,
                            const std::int64_t* starts, const std::int64_t* offsets,
                            const float* dy, std::int64_t ld_dy, float* dw_t, std::int64_t ld_dw,
                            bool load_dw) {
  for (std::int64_t c = 0; c < channels; c += kW) {
    Vec acc[kTaps];
    for (int t = 0; t < kTaps; ++t) acc[t] = load_dw ? load(dw_t + t * ld_dw + c) : Vec{};
    for (std::int64_t n = 0; n < count; ++n) {
      const Vec g = load(dy + n * ld_dy + c);
      const float* at = x + starts[n] + c;
      for (int t = 0; t < kTaps; ++t) acc[t] = fused(load(at + offsets[t]), g, acc[t]);
    }
    for (int t = 0; t < kTaps; ++t) store(dw_t + t * ld_dw + c, acc[t]);
  }
}

// depthwise_weight_block over any number of taps, at most 8 chains of a vector each in flight.
void depthwise_weight_chains(std::int64_t count, std::int64_t channels, std::int64_t taps,
                             const float* x, const std::int64_t* starts,
                             const std::int64_t* offsets, const float* dy, std::int64_t ld_dy,
                             float* dw_t, std::int64_t ld_dw, bool load_dw) {
  for (std::int64_t t0 = 0; t0 < taps; t0 += 8) {
    const std::int64_t* o = offsets + t0;
    float* d = dw_t + t0 * ld_dw;
    switch (std::min<std::int64_t>(8, taps - t0)) {
#define VT_DEPTHWISE_CASE(n)                                                                \
  case n:                                                                                   \
    depthwise_weight_block<n>(count, channels, x, starts, o, dy, ld_dy, d, ld_dw, load_dw); \
    break;
      VT_DEPTHWISE_CASE(1)
      VT_DEPTHWISE_CASE(2)
      VT_DEPTHWISE_CASE(3)
      VT_DEPTHWISE_CASE(4)
      VT_DEPTHWISE_CASE(5)
      VT_DEPTHWISE_CASE(6)
      VT_DEPTHWISE_CASE(7)
      VT_DEPTHWISE_CASE(8)
#undef VT_DEPTHWISE_CASE
      default:
        break;
    }
  }
}

}  // namespace

DepthwiseKernel depthwise_kernel() {
  return {static_cast<int>(kW), &depthwise_tap_chains, &depthwise_weight_chains};
}

}  // namespace vt::kernels::VT_GEMM_NAMESPACE
