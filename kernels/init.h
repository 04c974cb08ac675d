#pragma once
// Initial weights in the portable arithmetic (docs/portable.md, "Initial weights"): drawn from
// the project's stream (seed, 6, i) for the i-th parameter in sorted-name order, element j from
// its j-th draw (normal: draws 4j .. 4j+3), so no generator state and no library decides them.

#include <cstdint>

namespace vt::kernels {

// U(−b, b) with b = 1 / √fan_in: x = (2u − 1)·b. PyTorch's default for linear and convolution
// weights and biases, with our own draws.
void init_uniform_fan_in(std::int64_t n, std::uint64_t state, std::int64_t fan_in, float* out);
// Approximately N(0, 1): training/zoo/prng.h's normal() of draws 4j..4j+3 (embeddings).
void init_normal(std::int64_t n, std::uint64_t state, float* out);
void fill(std::int64_t n, float value, float* out);

}  // namespace vt::kernels
