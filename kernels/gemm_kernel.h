#pragma once
// The interface between gemm.cpp's blocking and the per-instruction-set inner loops.

#include <cstdint>

#include "kernels/gemm.h"

namespace vt::kernels {

// One tile of C: rows i < mr and columns j < nr of C[i][j] = chain over k < kc of
// A[i][k] · B[k][j]. A is read where it lies (a packed panel: row stride 1, column stride MR);
// B's rows must be contiguous (col_stride 1) and readable for all NR columns (a packed panel:
// row stride NR). At most one of the two has row offsets.
struct MicroKernel {
  int mr = 0;  // rows of C per tile
  int nr = 0;  // columns of C per tile
  void (*run)(std::int64_t kc, const MatrixRef& a, const MatrixRef& b, float* c, std::int64_t ldc,
              bool load_c, int mr, int nr) = nullptr;
};

// A depthwise convolution's inner loops (depthwise_micro.h says what each computes); `lanes`
// floats a vector, the unit its widths are rounded up to.
struct DepthwiseKernel {
  int lanes = 0;
  void (*tap_chains)(std::int64_t rows, std::int64_t width, std::int64_t taps, const float* w,
                     const float* in, const std::int64_t* offsets, std::int64_t ld_in, float* out,
                     std::int64_t ld_out) = nullptr;
  void (*weight_chains)(std::int64_t count, std::int64_t channels, std::int64_t taps,
                        const float* x, const std::int64_t* starts, const std::int64_t* offsets,
                        const float* dy, std::int64_t ld_dy, float* dw_t, std::int64_t ld_dw,
                        bool load_dw) = nullptr;
};

namespace scalar {  // x86-64 without FMA instructions: the C library's fmaf
MicroKernel micro_kernel();
DepthwiseKernel depthwise_kernel();
}  // namespace scalar
namespace generic {
MicroKernel micro_kernel();
DepthwiseKernel depthwise_kernel();
}  // namespace generic
namespace avx2 {
MicroKernel micro_kernel();
DepthwiseKernel depthwise_kernel();
}  // namespace avx2
namespace avx512 {
MicroKernel micro_kernel();
DepthwiseKernel depthwise_kernel();
}  // namespace avx512
namespace avx512_narrow {  // one vector wide: products with at most 16 columns
MicroKernel micro_kernel();
}

}  // namespace vt::kernels
