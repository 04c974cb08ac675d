#pragma once
// The interface between gemm.cpp's blocking and the per-instruction-set inner loops.

#include <cstdint>

namespace vt::kernels {

// One tile of C: rows i < mr and columns j < nr of C[i][j] = chain over k < kc of
// a[i·a_row + k·a_col] · b[k·b_row + j]. A is read where it lies (a packed panel has a_row 1,
// a_col MR); B's rows must be contiguous and hold all NR columns (a packed panel: b_row NR).
struct MicroKernel {
  int mr = 0;  // rows of C per tile
  int nr = 0;  // columns of C per tile
  void (*run)(std::int64_t kc, const float* a, std::int64_t a_row, std::int64_t a_col,
              const float* b, std::int64_t b_row, float* c, std::int64_t ldc, bool load_c, int mr,
              int nr) = nullptr;
};

namespace generic {
MicroKernel micro_kernel();
}
namespace avx2 {
MicroKernel micro_kernel();
}
namespace avx512 {
MicroKernel micro_kernel();
}

}  // namespace vt::kernels
