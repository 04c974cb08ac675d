#pragma once
// Optimizer updates in the portable arithmetic (docs/portable.md, "Optimizers"): one element at
// a time, so lanes and threads split elements and never change a bit. The per-step scalars
// (learning rate, bias corrections) are computed by the caller in binary64 with IEEE
// operations only (training/zoo/schedule.h) and rounded to binary32 once.

#include <cstdint>
#include <span>

namespace vt::kernels {

struct SgdStep {
  float lr = 0.0f, momentum = 0.0f, weight_decay = 0.0f;
  bool nesterov = false;
  bool first = false;  // the first step: the momentum buffer starts at the gradient
};
// buffer may be null when momentum is 0.
void sgd_update(std::int64_t n, const SgdStep& s, float* param, const float* grad, float* buffer);

// One tensor of a model's SGD update (buffer: null when momentum is 0).
struct SgdTensor {
  std::int64_t n = 0;
  float* param = nullptr;
  const float* grad = nullptr;
  float* buffer = nullptr;
};
// sgd_update over each tensor with the same step scalars, as one pass (as adam_update below).
void sgd_update(std::span<const SgdTensor> tensors, const SgdStep& s);

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

// One tensor of a model's Adam update.
struct AdamTensor {
  std::int64_t n = 0;
  float* param = nullptr;
  const float* grad = nullptr;
  float* exp_avg = nullptr;
  float* exp_avg_sq = nullptr;
};
// adam_update over each tensor with the same step scalars, as one pass over all their elements:
// one parallel region for the model, not one per tensor. The bits are adam_update's, element by
// element. With a trace sink listening it is adam_update on each tensor in turn, so that the
// trace has one call per tensor (docs/dispute.md).
void adam_update(std::span<const AdamTensor> tensors, const AdamStep& s);

// The weights' moving average after an update (optimizer.ema_decay): a ← (a ⊗ d) ⊕ (x ⊗ e),
// element by element, where d is the decay and e = 1 − d, each rounded once to binary32 by the
// caller (PyTorch's `avg * decay + param * (1 - decay)` with Python floats, operation for
// operation).
void ema_update(std::int64_t n, float* average, const float* live, float decay,
                float one_minus_decay);

// One tensor of the model's moving average.
struct EmaTensor {
  std::int64_t n = 0;
  float* average = nullptr;
  const float* live = nullptr;
};
// ema_update over each tensor, as one pass (as adam_update above); one call per tensor with a
// trace sink listening.
void ema_update(std::span<const EmaTensor> tensors, float decay, float one_minus_decay);

}  // namespace vt::kernels
