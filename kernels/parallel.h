#pragma once
// Threads for the portable kernels. Threads only ever split *outputs* (tiles of a matrix,
// channels, rows): no value is summed across threads, so the thread count changes the time a
// kernel takes and never a bit of its result (docs/portable.md, "Threads").

#include <cstdint>
#include <functional>

namespace vt::kernels {

// The threads parallel_for uses from now on in this process (>= 1): the provider's choice.
void set_threads(int threads);
int threads();

// Runs body(begin, end) over [0, n) cut into contiguous chunks, at most one per thread and none
// smaller than `grain` items; returns when all are done. Each participating thread first puts
// its floating-point unit in IEEE mode (round to nearest, no flush of subnormals), whatever a
// library may have set on it.
void parallel_for(std::int64_t n, std::int64_t grain,
                  const std::function<void(std::int64_t begin, std::int64_t end)>& body);

// parallel_for over the columns of a rows × cols reduction whose columns are independent chains
// over the rows (a bias gradient): threads take runs of 16 columns (one AVX-512 vector) with at
// least 16384 terms each, so that a layer's 64 columns over 512 tokens are worth two threads.
void parallel_for_columns(std::int64_t rows, std::int64_t cols,
                          const std::function<void(std::int64_t begin, std::int64_t end)>& body);

// Puts the calling thread's floating-point unit in IEEE mode (as parallel_for does).
void ieee_mode();

// Whether the calling thread runs inside a parallel_for's body (an exception must not leave it).
bool in_parallel();

}  // namespace vt::kernels
