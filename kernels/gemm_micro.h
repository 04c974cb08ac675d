// The register-blocked inner loop of gemm, written once and compiled once per instruction set
// and tile shape (gemm_scalar.cpp, gemm_generic.cpp, gemm_avx2.cpp, gemm_avx512.cpp, each with
// its own -m flags; each inclusion in its own namespace, so the linker never merges an AVX-512
// copy into a generic caller). No include guard: a file may include it once per tile shape, with
// other macros.
//
// It multiplies an MR×kc panel of A by a kc×NR panel of B (gemm_kernel.h says where they lie)
// into an MR×NR tile of C. acc[i][j] holds C[i][j]'s chain: for each k in order,
// acc = fma(a, b, acc), rounded once, a GCC vector holding W consecutive j. The fusion is
// written out (`fused`), never left to the compiler, which the build forbids to contract.

#include <cstdint>
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "kernels/gemm_kernel.h"

#ifndef VT_GEMM_NAMESPACE
#error "define VT_GEMM_NAMESPACE, VT_GEMM_W, VT_GEMM_MR and VT_GEMM_NV before including"
#endif

namespace vt::kernels::VT_GEMM_NAMESPACE {
namespace {

constexpr std::int64_t kW = VT_GEMM_W;  // 64-bit: it scales pointer offsets
constexpr int kMR = VT_GEMM_MR;
constexpr int kNV = VT_GEMM_NV;
constexpr int kNR = VT_GEMM_W * VT_GEMM_NV;
typedef float Vec __attribute__((vector_size(kW * sizeof(float))));

// Always inlined, at every optimisation level: the fused multiply-adds must lie in the product
// loops themselves (kernels_fuse_only_in_products reads the machine code), and at -O0 a plain
// inline helper would be a function of its own.
#define VT_INLINE [[gnu::always_inline]] inline

VT_INLINE Vec load(const float* p) {
  Vec v;
  __builtin_memcpy(&v, p, sizeof v);
  return v;
}
VT_INLINE void store(float* p, Vec v) { __builtin_memcpy(p, &v, sizeof v); }

// The vector of x in every lane, and a·b + c rounded once (IEEE 754 fusedMultiplyAdd) lane by
// lane: the instruction where the target has one, else the C library's fmaf (exact, and slow).
#if VT_GEMM_W == 16 && defined(__AVX512F__)
VT_INLINE Vec broadcast(float x) { return reinterpret_cast<Vec>(_mm512_set1_ps(x)); }
VT_INLINE Vec fused(Vec a, Vec b, Vec c) {
  return reinterpret_cast<Vec>(_mm512_fmadd_ps(
      reinterpret_cast<__m512>(a), reinterpret_cast<__m512>(b), reinterpret_cast<__m512>(c)));
}
#elif VT_GEMM_W == 8 && defined(__FMA__)
VT_INLINE Vec broadcast(float x) { return reinterpret_cast<Vec>(_mm256_set1_ps(x)); }
VT_INLINE Vec fused(Vec a, Vec b, Vec c) {
  return reinterpret_cast<Vec>(_mm256_fmadd_ps(
      reinterpret_cast<__m256>(a), reinterpret_cast<__m256>(b), reinterpret_cast<__m256>(c)));
}
#elif VT_GEMM_W == 4 && defined(__FMA__)
VT_INLINE Vec broadcast(float x) { return reinterpret_cast<Vec>(_mm_set1_ps(x)); }
VT_INLINE Vec fused(Vec a, Vec b, Vec c) {
  return reinterpret_cast<Vec>(_mm_fmadd_ps(
      reinterpret_cast<__m128>(a), reinterpret_cast<__m128>(b), reinterpret_cast<__m128>(c)));
}
#else
VT_INLINE Vec broadcast(float x) {
  Vec v;
  for (int l = 0; l < kW; ++l) v[l] = x;
  return v;
}
VT_INLINE Vec fused(Vec a, Vec b, Vec c) {
  Vec r;
  for (int l = 0; l < kW; ++l) r[l] = __builtin_fmaf(a[l], b[l], c[l]);
  return r;
}
#endif

// A[i][k] and B's row k where the operands lie: at a fixed stride, or at an offset per row.
struct StridedA {
  const float* a;
  std::int64_t row, col;
  float at(int i, std::int64_t k) const { return a[i * row + k * col]; }
};
struct OffsetA {
  const float* a;
  const std::int64_t* offsets;
  std::int64_t col;
  float at(int i, std::int64_t k) const { return a[offsets[i] + k * col]; }
};
struct StridedB {
  const float* b;
  std::int64_t row;
  const float* at(std::int64_t k) const { return b + k * row; }
};
struct OffsetB {
  const float* b;
  const std::int64_t* offsets;
  const float* at(std::int64_t k) const { return b + offsets[k]; }
};

template <class A, class B>
void micro(std::int64_t kc, A a, B b, float* c, std::int64_t ldc, bool load_c, int mr, int nr) {
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
    Vec bk[kNV];
    const float* row = b.at(k);
    for (int v = 0; v < kNV; ++v) bk[v] = load(row + v * kW);
    for (int i = 0; i < kMR; ++i) {
      const float ai = a.at(i, k);
      const Vec av = broadcast(ai);
      for (int v = 0; v < kNV; ++v) acc[i][v] = fused(av, bk[v], acc[i][v]);
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

// One instantiation per way the operands lie, chosen once per tile.
void run(std::int64_t kc, const MatrixRef& a, const MatrixRef& b, float* c, std::int64_t ldc,
         bool load_c, int mr, int nr) {
  if (a.row_offsets != nullptr) {
    micro(kc, OffsetA{a.data, a.row_offsets, a.col_stride}, StridedB{b.data, b.row_stride}, c, ldc,
          load_c, mr, nr);
  } else if (b.row_offsets != nullptr) {
    micro(kc, StridedA{a.data, a.row_stride, a.col_stride}, OffsetB{b.data, b.row_offsets}, c, ldc,
          load_c, mr, nr);
  } else {
    micro(kc, StridedA{a.data, a.row_stride, a.col_stride}, StridedB{b.data, b.row_stride}, c, ldc,
          load_c, mr, nr);
  }
}

}  // namespace

MicroKernel micro_kernel() { return {kMR, kNR, &run}; }

}  // namespace vt::kernels::VT_GEMM_NAMESPACE
