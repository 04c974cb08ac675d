#pragma once
// Gradient clipping in the portable arithmetic (docs/portable.md, "Gradient clipping"): the global
// norm of every gradient, as torch.nn.utils.clip_grad_norm_ defines it, summed in an order
// written down, then the gradients scaled by min(1, max_norm ⊘ (norm ⊕ 1e−6)). A tensor's sum is
// taken in chunks of kClipChunk values, each a lane sum (value i of a chunk to lane i mod 16, each
// lane a chain from +0.0, the lanes summed pairwise), then the lane sum of the chunks' sums:
// threads split chunks, so no count of threads or vector lanes changes a bit.

#include <cstdint>

namespace vt::kernels {

inline constexpr std::int64_t kClipChunk = 16384;

// The sum of x ⊗ x over n values, in the order above.
float sum_of_squares(std::int64_t n, const float* x);
// The largest |x| of n values (+0.0 for none); NaN when any value is NaN.
float abs_max(std::int64_t n, const float* x);
// The factor every gradient is multiplied by: c = max_norm ⊘ (norm ⊕ 1e−6), where norm is
// sqrt(the lane sum of the `count` parts) for the l2 norm (each part a tensor's sum_of_squares,
// tensors in canonical order) or the largest part for the inf norm (each an abs_max); then
// min(c, 1), NaN staying NaN.
float clip_coefficient(std::int64_t count, const float* parts, float max_norm, bool inf);
// x ← x ⊗ c, element by element; nothing when c is 1 (x ⊗ 1 is x).
void scale_gradient(std::int64_t n, float* x, float c);

}  // namespace vt::kernels
