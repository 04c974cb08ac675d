#pragma once
// Losses of real models in the portable arithmetic (docs/portable.md, "Losses, further forms").
// Each returns the mean loss; each backward takes g, the gradient of that scalar. Threads split
// rows; the mean over rows is one chain in row order.

#include <cstdint>

namespace vt::kernels {

// Negative log-likelihood of log-probabilities [rows, classes]; rows whose target is
// ignore_index count for nothing (the mean is over the others). Targets otherwise in
// [0, classes), checked by the caller. With no row left the loss is 0/0 (NaN), as LibTorch's.
float nll_loss(std::int64_t rows, std::int64_t classes, const float* logp,
               const std::int64_t* targets, std::int64_t ignore_index);
void nll_loss_backward(std::int64_t rows, std::int64_t classes, const std::int64_t* targets,
                       std::int64_t ignore_index, float g, float* dlogp);

// Cross-entropy with label smoothing eps > 0 (eps 0 is softmax.h's cross_entropy). Saves each
// row's max and Σ exp.
float cross_entropy_smoothed(std::int64_t rows, std::int64_t classes, const float* logits,
                             const std::int64_t* targets, float eps, float* row_max,
                             float* row_sum);
void cross_entropy_smoothed_backward(std::int64_t rows, std::int64_t classes, const float* logits,
                                     const std::int64_t* targets, float eps, const float* row_max,
                                     const float* row_sum, float g, float* dlogits);

// Binary cross-entropy of n logits against n targets.
float bce_with_logits(std::int64_t n, const float* x, const float* target);
void bce_with_logits_backward(std::int64_t n, const float* x, const float* target, float g,
                              float* dx);

}  // namespace vt::kernels
