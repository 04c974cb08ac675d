#include "kernels/activation.h"

#include "kernels/parallel.h"
#include "kernels/scalar.h"

namespace vt::kernels {
namespace {

constexpr std::int64_t kGrain = 8192;

float forward_one(Activation f, const ActivationParams& p, float x) {
  switch (f) {
    case Activation::kSigmoid:
      return vt_sigmoid(x);
    case Activation::kTanh:
      return vt_tanh(x);
    case Activation::kSilu:
      return x * vt_sigmoid(x);
    case Activation::kHardtanh:
      return x < p.min_val ? p.min_val : (x > p.max_val ? p.max_val : x);
    case Activation::kHardsigmoid:
      return x <= -3.0f ? 0.0f : (x >= 3.0f ? 1.0f : x / 6.0f + 0.5f);
    case Activation::kHardswish:
      return x <= -3.0f ? 0.0f : (x >= 3.0f ? x : (x * (x + 3.0f)) / 6.0f);
    case Activation::kLeakyRelu:
      return x > 0.0f ? x : x * p.slope;
    case Activation::kElu:
      return x > 0.0f ? x : p.alpha * (vt_exp(x) - 1.0f);
    case Activation::kGeluTanh:
      return vt_gelu_tanh(x);
    case Activation::kSoftplus: {
      const float z = x * p.beta;
      return z > p.threshold ? x : vt_log(1.0f + vt_exp(z)) / p.beta;
    }
  }
  return x;
}

float backward_one(Activation f, const ActivationParams& p, float x, float y, float dy) {
  switch (f) {
    case Activation::kSigmoid:
      return dy * (y * (1.0f - y));
    case Activation::kTanh:
      return dy * (1.0f - y * y);
    case Activation::kSilu: {
      const float s = vt_sigmoid(x);
      return dy * (s * (1.0f + x * (1.0f - s)));
    }
    case Activation::kHardtanh:
      return (x <= p.min_val || x >= p.max_val) ? 0.0f : dy;
    case Activation::kHardsigmoid:
      return (x > -3.0f && x < 3.0f) ? dy / 6.0f : 0.0f;
    case Activation::kHardswish:
      return x < -3.0f ? 0.0f : (x <= 3.0f ? dy * (x / 3.0f + 0.5f) : dy);
    case Activation::kLeakyRelu:
      return x > 0.0f ? dy : dy * p.slope;
    case Activation::kElu:
      return x > 0.0f ? dy : dy * (p.alpha * vt_exp(x));
    case Activation::kGeluTanh:
      return dy * vt_gelu_tanh_grad(x);
    case Activation::kSoftplus: {
      const float z = x * p.beta;
      if (z > p.threshold) return dy;
      const float e = vt_exp(z);
      return dy * (e / (e + 1.0f));
    }
  }
  return dy;
}

}  // namespace

bool backward_reads_output(Activation f) {
  return f == Activation::kSigmoid || f == Activation::kTanh;
}

void activation(Activation f, const ActivationParams& p, std::int64_t n, const float* x, float* y) {
  parallel_for(n, kGrain, [=, &p](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) y[i] = forward_one(f, p, x[i]);
  });
}

void activation_backward(Activation f, const ActivationParams& p, std::int64_t n, const float* x,
                         const float* y, const float* dy, float* dx) {
  parallel_for(n, kGrain, [=, &p](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      dx[i] = backward_one(f, p, x != nullptr ? x[i] : 0.0f, y != nullptr ? y[i] : 0.0f, dy[i]);
  });
}

}  // namespace vt::kernels
