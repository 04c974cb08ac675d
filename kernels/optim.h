#pragma once
// Optimizer updates in the portable arithmetic (docs/portable.md, "Optimizers"): one element at
// a time, so lanes and threads split elements and never change a bit. The per-step scalars
// (learning rate, bias corrections) are computed by the caller in binary64 with IEEE
// operations only (training/schedule.h) and rounded to binary32 once.

#include <cstdint>

namespace vt::kernels {

struct SgdStep {
  float lr = 0.0f, momentum = 0.0f, weight_decay = 0.0f;
  bool nesterov = false;
  bool first = false;  // the first step: the momentum buffer starts at the gradient
};
// buffer may be null when momentum is 0.
void sgd_update(std::int64_t n, const SgdStep& s, float* param, const float* grad, float* buffer);

struct AdamStep {
  float lr = 0.0f;
  float lr_over_bias1 = 0.0f;  // lr / (1 − β1^t), rounded once
  float bias2_sqrt = 1.0f;     // √(1 − β2^t), rounded once
  // Adam adds wd·p to the gradient; AdamW (decoupled) scales p by 1 − lr·wd first.
  float weight_decay = 0.0f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f;
  bool decoupled = false;
};
void adam_update(std::int64_t n, const AdamStep& s, float* param, const float* grad, float* exp_avg,
                 float* exp_avg_sq);

}  // namespace vt::kernels
