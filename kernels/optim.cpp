#include "kernels/optim.h"

#include <cmath>

#include "kernels/parallel.h"

namespace vt::kernels {
namespace {
constexpr std::int64_t kGrain = 16384;
}

void sgd_update(std::int64_t n, const SgdStep& s, float* param, const float* grad, float* buffer) {
  parallel_for(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      float d = grad[i];
      if (s.weight_decay != 0.0f) d = d + s.weight_decay * param[i];
      if (buffer != nullptr) {
        buffer[i] = s.first ? d : buffer[i] * s.momentum + d;
        d = s.nesterov ? d + s.momentum * buffer[i] : buffer[i];
      }
      param[i] = param[i] - s.lr * d;
    }
  });
}

void adam_update(std::int64_t n, const AdamStep& s, float* param, const float* grad, float* exp_avg,
                 float* exp_avg_sq) {
  const float decay = 1.0f - s.lr * s.weight_decay;
  const float w1 = 1.0f - s.beta1;
  const float w2 = 1.0f - s.beta2;
  parallel_for(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      float g = grad[i];
      if (s.decoupled) {
        param[i] = param[i] * decay;
      } else if (s.weight_decay != 0.0f) {
        g = g + s.weight_decay * param[i];
      }
      exp_avg[i] = exp_avg[i] + w1 * (g - exp_avg[i]);
      exp_avg_sq[i] = exp_avg_sq[i] * s.beta2 + w2 * (g * g);
      const float denom = std::sqrt(exp_avg_sq[i]) / s.bias2_sqrt + s.eps;
      param[i] = param[i] - s.lr_over_bias1 * (exp_avg[i] / denom);
    }
  });
}

}  // namespace vt::kernels
