#include "kernels/optim.h"

#include <cmath>

#include "kernels/parallel.h"
#include "kernels/trace.h"

namespace vt::kernels {
namespace {
constexpr std::int64_t kGrain = 16384;
}

void sgd_update(std::int64_t n, const SgdStep& s, float* param, const float* grad, float* buffer) {
  trace::Call traced(
      "sgd_update",
      {trace::integer("n", n), trace::real("lr", s.lr), trace::real("momentum", s.momentum),
       trace::real("weight_decay", s.weight_decay), trace::integer("nesterov", s.nesterov),
       trace::integer("first", s.first)},
      {trace::f32("param", param, n), trace::f32("grad", grad, n),
       trace::f32_or_none("buffer", buffer, n)});
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
  traced.outputs({trace::f32("param", param, n), trace::f32_or_none("buffer", buffer, n)});
}

void adam_update(std::int64_t n, const AdamStep& s, float* param, const float* grad, float* exp_avg,
                 float* exp_avg_sq) {
  trace::Call traced(
      "adam_update",
      {trace::integer("n", n), trace::real("lr", s.lr),
       trace::real("lr_over_bias1", s.lr_over_bias1), trace::real("bias2_sqrt", s.bias2_sqrt),
       trace::real("weight_decay", s.weight_decay), trace::real("beta1", s.beta1),
       trace::real("beta2", s.beta2), trace::real("eps", s.eps),
       trace::integer("decoupled", s.decoupled)},
      {trace::f32("param", param, n), trace::f32("grad", grad, n),
       trace::f32("exp_avg", exp_avg, n), trace::f32("exp_avg_sq", exp_avg_sq, n)});
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
  traced.outputs({trace::f32("param", param, n), trace::f32("exp_avg", exp_avg, n),
                  trace::f32("exp_avg_sq", exp_avg_sq, n)});
}

}  // namespace vt::kernels
