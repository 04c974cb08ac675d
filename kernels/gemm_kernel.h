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

namespace scalar {  // x86-64 without FMA instructions: the C library's fmaf
MicroKernel micro_kernel();
}
namespace generic {
MicroKernel micro_kernel();
}
namespace avx2 {
MicroKernel micro_kernel();
}
namespace avx512 {
MicroKernel micro_kernel();
}
namespace avx512_narrow {  // one vector wide: products with at most 16 columns
MicroKernel micro_kernel();
}

}  // namespace vt::kernels
