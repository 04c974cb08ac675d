#include "kernels/parallel.h"

#include <omp.h>

#include <algorithm>
#include <atomic>

#if defined(__x86_64__)
#include <xmmintrin.h>
#endif

namespace vt::kernels {
namespace {
std::atomic<int> g_threads{1};
}  // namespace

void set_threads(int threads) { g_threads.store(std::max(1, threads)); }
int threads() { return g_threads.load(); }

void ieee_mode() {
#if defined(__x86_64__)
  // MXCSR: clear flush-to-zero (bit 15), denormals-are-zero (bit 6) and the rounding mode
  // (bits 13-14: 00 is round to nearest even).
  _mm_setcsr(_mm_getcsr() & ~(0x8000u | 0x0040u | 0x6000u));
#endif
}

bool in_parallel() { return omp_in_parallel() != 0; }

void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t, std::int64_t)>& body) {
  if (n <= 0) return;
  const std::int64_t most = std::max<std::int64_t>(1, n / std::max<std::int64_t>(1, grain));
  const int t = static_cast<int>(std::min<std::int64_t>(threads(), most));
  // Inside another parallel_for (a convolution tile's product) the caller's thread does it all.
  if (t <= 1 || omp_in_parallel()) {
    ieee_mode();
    body(0, n);
    return;
  }
#pragma omp parallel num_threads(t)
  {
    ieee_mode();
    const std::int64_t id = omp_get_thread_num();
    const std::int64_t count = omp_get_num_threads();
    const std::int64_t begin = n * id / count;
    const std::int64_t end = n * (id + 1) / count;
    if (begin < end) body(begin, end);
  }
}

void parallel_for_columns(std::int64_t rows, std::int64_t cols,
                          const std::function<void(std::int64_t, std::int64_t)>& body) {
  constexpr std::int64_t kRun = 16;
  const std::int64_t runs = (cols + kRun - 1) / kRun;
  const std::int64_t grain =
      std::max<std::int64_t>(1, 16384 / std::max<std::int64_t>(1, rows * kRun));
  parallel_for(runs, grain, [&](std::int64_t first_run, std::int64_t end_run) {
    body(first_run * kRun, std::min(cols, end_run * kRun));
  });
}

}  // namespace vt::kernels
