// Blocking, packing and threads around the inner loops of gemm_micro.h. Nothing here does
// arithmetic: it only decides which chain each tile continues, in k order.
#include "kernels/gemm.h"

#include <algorithm>
#include <vector>

#include "kernels/gemm_kernel.h"
#include "kernels/isa.h"
#include "kernels/parallel.h"
#include "kernels/trace.h"

namespace vt::kernels {
namespace {

constexpr std::int64_t kKc = 256;  // k per block: a packed B panel stays in L1
constexpr std::int64_t kMc = 96;   // rows of A per block (a multiple of every MR)
constexpr std::int64_t kNc = 256;  // columns of B per block (a multiple of every NR)
constexpr std::int64_t kMostPackedB = std::int64_t{1} << 22;  // floats of B packed whole (16 MiB)

// The kernel for an N-column product: on AVX-512, one vector wide when N fits in one vector.
const MicroKernel& kernel(std::int64_t n) {
  static const MicroKernel wide = [] {
#if defined(__x86_64__)
    switch (isa()) {
      case Isa::kAvx512:
        return avx512::micro_kernel();
      case Isa::kAvx2:
        return avx2::micro_kernel();
      case Isa::kGeneric:
        break;
      case Isa::kScalar:
        return scalar::micro_kernel();
    }
#endif
    return generic::micro_kernel();
  }();
#if defined(__x86_64__)
  static const MicroKernel narrow = avx512_narrow::micro_kernel();
  if (n <= narrow.nr && isa() == Isa::kAvx512) return narrow;
#endif
  return wide;
}

// Rows [m0, m0+mc) × k [k0, k0+kc) of A as MR-row panels, k-major, zero rows past M.
void pack_a(const MatrixRef& a, std::int64_t m0, std::int64_t mc, std::int64_t k0, std::int64_t kc,
            int mr, float* out) {
  for (std::int64_t p = 0; p < mc; p += mr) {
    for (std::int64_t k = 0; k < kc; ++k) {
      for (int i = 0; i < mr; ++i)
        *out++ = p + i < mc ? a.row(m0 + p + i)[(k0 + k) * a.col_stride] : 0.0f;
    }
  }
}

// k [k0, k0+kc) × columns [n0, n0+nc) of B as NR-column panels, k-major, zero columns past N.
void pack_b(const MatrixRef& b, std::int64_t k0, std::int64_t kc, std::int64_t n0, std::int64_t nc,
            int nr, float* out) {
  for (std::int64_t p = 0; p < nc; p += nr) {
    const std::int64_t width = std::min<std::int64_t>(nr, nc - p);
    for (std::int64_t k = 0; k < kc; ++k) {
      const float* row = b.row(k0 + k) + (n0 + p) * b.col_stride;
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

// The rows and columns of C one work item computes. Every element's chain runs over k in the
// same order whatever block and tile hold it, so the blocking changes only the time.
struct Blocks {
  std::int64_t mc = kMc, nc = kNc;
  std::int64_t m_blocks(std::int64_t M) const { return (M + mc - 1) / mc; }
  std::int64_t n_blocks(std::int64_t N) const { return (N + nc - 1) / nc; }
};

std::int64_t round_up(std::int64_t x, std::int64_t to) { return (x + to - 1) / to * to; }

// The cache-sized blocks, cut finer while the product has fewer than four of them per thread:
// the weight gradient of a small layer (64 × 64, summed over 512 tokens) is one block, which one
// thread would compute while the others wait. The longer side is halved first, never below one
// micro-kernel tile.
Blocks blocks_for(const MicroKernel& mk, std::int64_t batch, std::int64_t M, std::int64_t N,
                  int threads) {
  Blocks b;
  b.mc = std::min(kMc, round_up(M, mk.mr));
  b.nc = std::min(kNc, round_up(N, mk.nr));
  while (threads > 1 && batch * b.m_blocks(M) * b.n_blocks(N) < std::int64_t{4} * threads) {
    const bool cut_m = b.mc > mk.mr, cut_n = b.nc > mk.nr;
    if (cut_n && (!cut_m || b.nc / mk.nr >= b.mc / mk.mr)) {
      b.nc = round_up(b.nc / 2, mk.nr);
    } else if (cut_m) {
      b.mc = round_up(b.mc / 2, mk.mr);
    } else {
      break;
    }
  }
  return b;
}

// Block (m0, n0) of one product, its chains continued block of k after block of k. With
// `packed_whole_b` set, B is there already packed whole: for each block of k, its kc rows as
// NR-column panels of all N columns (pack_b of columns [0, N)).
void product(const MicroKernel& mk, const Blocks& blocks, std::int64_t M, std::int64_t N,
             std::int64_t K, const MatrixRef& a, const MatrixRef& b, float* c, std::int64_t ldc,
             bool accumulate, std::int64_t m0, std::int64_t n0, float* packed_a, float* packed_b,
             const float* packed_whole_b) {
  const std::int64_t mc = std::min(blocks.mc, M - m0);
  const std::int64_t nc = std::min(blocks.nc, N - n0);
  if (K == 0 && !accumulate) {
    for (std::int64_t i = 0; i < mc; ++i)
      std::fill(c + (m0 + i) * ldc + n0, c + (m0 + i) * ldc + n0 + nc, 0.0f);
  }
  for (std::int64_t k0 = 0; k0 < K; k0 += kKc) {
    const std::int64_t kc = std::min(kKc, K - k0);
    // Operands are read where they lie when they can be (B's rows contiguous, whole tiles);
    // the rest is packed. Either way each tile sees the same values in the same k order.
    const bool direct_b = b.col_stride == 1;
    const float* b_panels = packed_b;
    if (packed_whole_b != nullptr) {
      b_panels = packed_whole_b + k0 * round_up(N, mk.nr) + n0 * kc;
    } else if (!direct_b) {
      pack_b(b, k0, kc, n0, nc, mk.nr, packed_b);
    }
    const bool load_c = accumulate || k0 > 0;  // the chain goes on from C after block 0
    for (std::int64_t i = 0; i < mc; i += mk.mr) {
      const int mr = static_cast<int>(std::min<std::int64_t>(mk.mr, mc - i));
      MatrixRef a_tile = a;  // rows m0 + i..., columns k0...
      if (mr < mk.mr) {      // rows past M: a zero-padded panel
        pack_a(a, m0 + i, mr, k0, kc, mk.mr, packed_a);
        a_tile = {packed_a, 1, mk.mr};
      } else if (a.row_offsets != nullptr) {
        a_tile = {a.data + k0 * a.col_stride, 0, a.col_stride, a.row_offsets + m0 + i};
      } else {
        a_tile.data = a.row(m0 + i) + k0 * a.col_stride;
      }
      for (std::int64_t j = 0; j < nc; j += mk.nr) {
        const int nr = static_cast<int>(std::min<std::int64_t>(mk.nr, nc - j));
        float* c_tile = c + (m0 + i) * ldc + n0 + j;
        MatrixRef b_tile{b_panels + j * kc, mk.nr, 1};
        if (direct_b && nr == mk.nr) {
          b_tile = b.row_offsets != nullptr ? MatrixRef{b.data + n0 + j, 0, 1, b.row_offsets + k0}
                                            : MatrixRef{b.row(k0) + n0 + j, b.row_stride, 1};
        } else if (direct_b) {  // columns past N: a zero-padded panel of this tile alone
          pack_b(b, k0, kc, n0 + j, nr, mk.nr, packed_b);
          b_tile.data = packed_b;
        }
        mk.run(kc, a_tile, b_tile, c_tile, ldc, load_c, mr, nr);
      }
    }
  }
}

// The operands as the trace records them: batch × rows × cols, row-major.
std::vector<float> logical(const MatrixRef& m, std::int64_t batch, const BatchStride& batch_stride,
                           std::int64_t rows, std::int64_t cols) {
  std::vector<float> out(static_cast<std::size_t>(batch * rows * cols));
  float* to = out.data();
  for (std::int64_t bi = 0; bi < batch; ++bi) {
    MatrixRef at = m;
    at.data += batch_stride.offset(bi);
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* row = at.row(r);
      for (std::int64_t c = 0; c < cols; ++c) *to++ = row[c * at.col_stride];
    }
  }
  return out;
}
std::vector<float> logical_c(const float* c, std::int64_t ldc, const BatchStride& c_batch,
                             std::int64_t batch, std::int64_t M, std::int64_t N) {
  return logical(MatrixRef{c, ldc, 1, nullptr}, batch, c_batch, M, N);
}

}  // namespace

void gemm(std::int64_t batch, std::int64_t M, std::int64_t N, std::int64_t K, MatrixRef a,
          BatchStride a_batch, MatrixRef b, BatchStride b_batch, float* c, std::int64_t ldc,
          BatchStride c_batch, bool accumulate) {
  if (batch <= 0 || M <= 0 || N <= 0) return;
  if (trace::active()) {
    // Recorded on contiguous copies of the operands; the product itself runs as untraced.
    const std::vector<float> la = logical(a, batch, a_batch, M, K);
    const std::vector<float> lb = logical(b, batch, b_batch, K, N);
    const std::vector<float> lc =
        accumulate ? logical_c(c, ldc, c_batch, batch, M, N) : std::vector<float>();
    trace::Call traced(
        "gemm",
        {trace::integer("batch", batch), trace::integer("m", M), trace::integer("n", N),
         trace::integer("k", K), trace::integer("accumulate", accumulate)},
        {trace::f32("a", la.data(), batch * M * K), trace::f32("b", lb.data(), batch * K * N),
         trace::f32_or_none("c", accumulate ? lc.data() : nullptr, batch * M * N)});
    gemm(batch, M, N, K, a, a_batch, b, b_batch, c, ldc, c_batch, accumulate);
    const std::vector<float> out = logical_c(c, ldc, c_batch, batch, M, N);
    traced.outputs({trace::f32("c", out.data(), batch * M * N)});
    return;
  }
  const MicroKernel& mk = kernel(N);
  const Blocks blocks = blocks_for(mk, batch, M, N, in_parallel() ? 1 : threads());
  const std::int64_t m_blocks = blocks.m_blocks(M);
  const std::int64_t n_blocks = blocks.n_blocks(N);
  // A B read with a column stride (a linear layer's weight, attention's kᵀ) would be packed
  // again for every block of rows; packed once here, for the whole product, the tiles read the
  // same values (the same bits) and the weight is packed once a forward pass.
  const std::int64_t whole_b = round_up(N, mk.nr) * K;
  thread_local std::vector<float> packed_whole_b;
  const bool pack_whole_b = b.col_stride != 1 && m_blocks > 1 && batch * whole_b <= kMostPackedB;
  if (pack_whole_b) {
    packed_whole_b.resize(static_cast<std::size_t>(batch * whole_b));
    for (std::int64_t bi = 0; bi < batch; ++bi) {
      MatrixRef bb = b;
      bb.data += b_batch.offset(bi);
      for (std::int64_t k0 = 0; k0 < K; k0 += kKc) {
        pack_b(bb, k0, std::min(kKc, K - k0), 0, N, mk.nr,
               packed_whole_b.data() + bi * whole_b + k0 * round_up(N, mk.nr));
      }
    }
  }
  // The calling thread's buffer: inside the body, packed_whole_b would name each thread's own.
  const float* whole_b_panels = pack_whole_b ? packed_whole_b.data() : nullptr;
  parallel_for(batch * m_blocks * n_blocks, 1, [&](std::int64_t begin, std::int64_t end) {
    thread_local std::vector<float> packed_a, packed_b;
    packed_a.resize(static_cast<std::size_t>((kMc + mk.mr) * kKc));
    packed_b.resize(static_cast<std::size_t>((kNc + mk.nr) * kKc));
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t bi = item / (m_blocks * n_blocks);
      const std::int64_t m0 = (item / n_blocks) % m_blocks * blocks.mc;
      const std::int64_t n0 = item % n_blocks * blocks.nc;
      MatrixRef ab = a, bb = b;
      ab.data += a_batch.offset(bi);
      bb.data += b_batch.offset(bi);
      product(mk, blocks, M, N, K, ab, bb, c + c_batch.offset(bi), ldc, accumulate, m0, n0,
              packed_a.data(), packed_b.data(),
              whole_b_panels != nullptr ? whole_b_panels + bi * whole_b : nullptr);
    }
  });
}

std::int64_t gemm_tile_rows(std::int64_t N) { return kernel(N).mr; }

void column_sums(std::int64_t rows, std::int64_t cols, const float* x, std::int64_t ld,
                 float* out) {
  if (trace::active() && ld != cols) {  // recorded as the contiguous rows × cols matrix
    const std::vector<float> dense = logical(MatrixRef{x, ld, 1, nullptr}, 1, 0, rows, cols);
    trace::Call traced("column_sums", {trace::integer("rows", rows), trace::integer("cols", cols)},
                       {trace::f32("x", dense.data(), rows * cols)});
    column_sums(rows, cols, x, ld, out);
    traced.outputs({trace::f32("out", out, cols)});
    return;
  }
  trace::Call traced("column_sums", {trace::integer("rows", rows), trace::integer("cols", cols)},
                     {trace::f32("x", x, rows * cols)});
  parallel_for_columns(rows, cols, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t j = begin; j < end; ++j) out[j] = 0.0f;
    for (std::int64_t i = 0; i < rows; ++i) {
      const float* row = x + i * ld;
      for (std::int64_t j = begin; j < end; ++j) out[j] = out[j] + row[j];
    }
  });
  traced.outputs({trace::f32("out", out, cols)});
}

}  // namespace vt::kernels
