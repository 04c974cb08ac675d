#pragma once
// The register-blocked inner loop of gemm, written once and compiled once per instruction set
// (gemm_generic.cpp, gemm_avx2.cpp, gemm_avx512.cpp, each with its own -m flags and its own
// namespace, so the linker never merges an AVX-512 copy into a generic caller).
//
// It multiplies an MR×kc panel of A by a kc×NR panel of B (gemm_kernel.h says where they lie)
// into an MR×NR tile of C. acc[i][j] holds C[i][j]'s chain: for each k in order,
// acc = acc + a*b, a GCC vector holding W consecutive j. The build forbids contraction
// (-ffp-contract=off), so the product and the sum round separately, as docs/portable.md says.

#include <cstdint>

#include "kernels/gemm_kernel.h"

#ifndef VT_GEMM_NAMESPACE
#error "define VT_GEMM_NAMESPACE, VT_GEMM_W, VT_GEMM_MR and VT_GEMM_NV before including"
#endif

namespace vt::kernels::VT_GEMM_NAMESPACE {
namespace {

constexpr int kW = VT_GEMM_W;
constexpr int kMR = VT_GEMM_MR;
constexpr int kNV = VT_GEMM_NV;
constexpr int kNR = kW * kNV;
typedef float Vec __attribute__((vector_size(kW * sizeof(float))));

inline Vec load(const float* p) {
  Vec v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, Vec v) { __builtin_memcpy(p, &v, sizeof v); }

void micro(std::int64_t kc, const float* pa, std::int64_t a_row, std::int64_t a_col,
           const float* pb, std::int64_t b_row, float* c, std::int64_t ldc, bool load_c, int mr,
           int nr) {
  Vec acc[kMR][kNV];
  const bool full = mr == kMR && nr == kNR;
  alignas(64) float edge[kMR][kNR];
  if (!full) {
    for (int i = 0; i < kMR; ++i) {
      for (int j = 0; j < kNR; ++j) edge[i][j] = load_c && i < mr && j < nr ? c[i * ldc + j] : 0.0f;
    }
  }
  for (int i = 0; i < kMR; ++i) {
    for (int v = 0; v < kNV; ++v) {
      if (full) {
        acc[i][v] = load_c ? load(c + i * ldc + v * kW) : Vec{};
      } else {
        acc[i][v] = load(&edge[i][v * kW]);
      }
    }
  }
  for (std::int64_t k = 0; k < kc; ++k) {
    Vec b[kNV];
    for (int v = 0; v < kNV; ++v) b[v] = load(pb + k * b_row + v * kW);
    const float* ak = pa + k * a_col;
    for (int i = 0; i < kMR; ++i) {
      const float a = ak[i * a_row];
      for (int v = 0; v < kNV; ++v) acc[i][v] = acc[i][v] + a * b[v];
    }
  }
  if (full) {
    for (int i = 0; i < kMR; ++i) {
      for (int v = 0; v < kNV; ++v) store(c + i * ldc + v * kW, acc[i][v]);
    }
    return;
  }
  for (int i = 0; i < kMR; ++i) {
    for (int v = 0; v < kNV; ++v) store(&edge[i][v * kW], acc[i][v]);
  }
  for (int i = 0; i < mr; ++i) {
    for (int j = 0; j < nr; ++j) c[i * ldc + j] = edge[i][j];
  }
}

}  // namespace

MicroKernel micro_kernel() { return {kMR, kNR, &micro}; }

}  // namespace vt::kernels::VT_GEMM_NAMESPACE
