// Blocking, packing and threads around the inner loops of gemm_micro.h. Nothing here does
// arithmetic: it only decides which chain each tile continues, in k order.
#include "kernels/gemm.h"

#include <algorithm>
#include <vector>

#include "kernels/gemm_kernel.h"
#include "kernels/isa.h"
#include "kernels/parallel.h"

namespace vt::kernels {
namespace {

constexpr std::int64_t kKc = 256;  // k per block: a packed B panel stays in L1
constexpr std::int64_t kMc = 96;   // rows of A per block (a multiple of every MR)
constexpr std::int64_t kNc = 256;  // columns of B per block (a multiple of every NR)

const MicroKernel& kernel() {
  static const MicroKernel k = [] {
#if defined(__x86_64__)
    switch (isa()) {
      case Isa::kAvx512:
        return avx512::micro_kernel();
      case Isa::kAvx2:
        return avx2::micro_kernel();
      case Isa::kGeneric:
        break;
    }
#endif
    return generic::micro_kernel();
  }();
  return k;
}

// Rows [m0, m0+mc) × k [k0, k0+kc) of A as MR-row panels, k-major, zero rows past M.
void pack_a(MatrixRef a, std::int64_t m0, std::int64_t mc, std::int64_t k0, std::int64_t kc, int mr,
            float* out) {
  for (std::int64_t p = 0; p < mc; p += mr) {
    for (std::int64_t k = 0; k < kc; ++k) {
      for (int i = 0; i < mr; ++i) {
        *out++ = p + i < mc ? a.data[(m0 + p + i) * a.row_stride + (k0 + k) * a.col_stride] : 0.0f;
      }
    }
  }
}

// k [k0, k0+kc) × columns [n0, n0+nc) of B as NR-column panels, k-major, zero columns past N.
void pack_b(MatrixRef b, std::int64_t k0, std::int64_t kc, std::int64_t n0, std::int64_t nc, int nr,
            float* out) {
  for (std::int64_t p = 0; p < nc; p += nr) {
    const std::int64_t width = std::min<std::int64_t>(nr, nc - p);
    for (std::int64_t k = 0; k < kc; ++k) {
      const float* row = b.data + (k0 + k) * b.row_stride + (n0 + p) * b.col_stride;
      int j = 0;
      if (b.col_stride == 1) {
        for (; j < width; ++j) out[j] = row[j];
      } else {
        for (; j < width; ++j) out[j] = row[j * b.col_stride];
      }
      for (; j < nr; ++j) out[j] = 0.0f;
      out += nr;
    }
  }
}

}  // namespace

void gemm(std::int64_t batch, std::int64_t M, std::int64_t N, std::int64_t K, MatrixRef a,
          std::int64_t a_batch, MatrixRef b, std::int64_t b_batch, float* c, std::int64_t ldc,
          std::int64_t c_batch, bool accumulate) {
  if (batch <= 0 || M <= 0 || N <= 0) return;
  const MicroKernel& mk = kernel();
  const std::int64_t m_blocks = (M + kMc - 1) / kMc;
  const std::int64_t n_blocks = (N + kNc - 1) / kNc;
  const std::int64_t items = batch * m_blocks * n_blocks;
  parallel_for(items, 1, [&](std::int64_t begin, std::int64_t end) {
    thread_local std::vector<float> packed_a, packed_b;
    packed_a.resize(static_cast<std::size_t>((kMc + mk.mr) * kKc));
    packed_b.resize(static_cast<std::size_t>((kNc + mk.nr) * kKc));
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t bi = item / (m_blocks * n_blocks);
      const std::int64_t m0 = (item / n_blocks) % m_blocks * kMc;
      const std::int64_t n0 = item % n_blocks * kNc;
      const std::int64_t mc = std::min(kMc, M - m0);
      const std::int64_t nc = std::min(kNc, N - n0);
      MatrixRef ab{a.data + bi * a_batch, a.row_stride, a.col_stride};
      MatrixRef bb{b.data + bi * b_batch, b.row_stride, b.col_stride};
      float* cb = c + bi * c_batch;
      if (K == 0 && !accumulate) {
        for (std::int64_t i = 0; i < mc; ++i)
          std::fill(cb + (m0 + i) * ldc + n0, cb + (m0 + i) * ldc + n0 + nc, 0.0f);
      }
      for (std::int64_t k0 = 0; k0 < K; k0 += kKc) {
        const std::int64_t kc = std::min(kKc, K - k0);
        // Operands are read where they lie when they can be (B's rows contiguous, whole tiles);
        // the rest is packed. Either way each tile sees the same values in the same k order.
        const bool direct_b = bb.col_stride == 1;
        if (!direct_b) pack_b(bb, k0, kc, n0, nc, mk.nr, packed_b.data());
        const bool load_c = accumulate || k0 > 0;  // the chain goes on from C after block 0
        for (std::int64_t i = 0; i < mc; i += mk.mr) {
          const int mr = static_cast<int>(std::min<std::int64_t>(mk.mr, mc - i));
          const float* a_tile = ab.data + (m0 + i) * ab.row_stride + k0 * ab.col_stride;
          std::int64_t a_row = ab.row_stride, a_col = ab.col_stride;
          if (mr < mk.mr) {  // rows past M: a zero-padded panel
            pack_a(ab, m0 + i, mr, k0, kc, mk.mr, packed_a.data());
            a_tile = packed_a.data();
            a_row = 1;
            a_col = mk.mr;
          }
          for (std::int64_t j = 0; j < nc; j += mk.nr) {
            const int nr = static_cast<int>(std::min<std::int64_t>(mk.nr, nc - j));
            const float* b_tile = packed_b.data() + j * kc;
            std::int64_t b_row = mk.nr;
            if (direct_b && nr == mk.nr) {
              b_tile = bb.data + k0 * bb.row_stride + n0 + j;
              b_row = bb.row_stride;
            } else if (direct_b) {  // columns past N: a zero-padded panel of this tile alone
              pack_b(bb, k0, kc, n0 + j, nr, mk.nr, packed_b.data());
              b_tile = packed_b.data();
            }
            mk.run(kc, a_tile, a_row, a_col, b_tile, b_row, cb + (m0 + i) * ldc + n0 + j, ldc,
                   load_c, mr, nr);
          }
        }
      }
    }
  });
}

void column_sums(std::int64_t rows, std::int64_t cols, const float* x, std::int64_t ld,
                 float* out) {
  parallel_for(cols, 256, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t j = begin; j < end; ++j) out[j] = 0.0f;
    for (std::int64_t i = 0; i < rows; ++i) {
      const float* row = x + i * ld;
      for (std::int64_t j = begin; j < end; ++j) out[j] = out[j] + row[j];
    }
  });
}

}  // namespace vt::kernels
