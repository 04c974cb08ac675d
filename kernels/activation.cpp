#include "kernels/activation.h"

#include <array>
#include <cmath>

#include "kernels/parallel.h"
#include "kernels/scalar.h"
#include "kernels/trace.h"

namespace vt::kernels {
namespace {

constexpr std::int64_t kGrain = 8192;
// SELU's α and λ (Klambauer et al.; torch.nn.SELU), each rounded once to binary32.
constexpr float kSeluAlpha = static_cast<float>(1.6732632423543772848170429916717);
constexpr float kSeluScale = static_cast<float>(1.0507009873554804934193349852946);

// mish's softplus: PyTorch's threshold of 20, where log(1 + e^x) is x in binary32.
float mish_softplus(float x) { return x > 20.0f ? x : vt_log(1.0f + vt_exp(x)); }

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
    case Activation::kSelu:
      return x > 0.0f ? kSeluScale * x : kSeluScale * (kSeluAlpha * (vt_exp(x) - 1.0f));
    case Activation::kCelu:
      return x > 0.0f ? x : p.alpha * (vt_exp(x / p.alpha) - 1.0f);
    case Activation::kMish:
      return x * vt_tanh(mish_softplus(x));
    case Activation::kLogSigmoid:
      return (x < 0.0f ? x : 0.0f) - vt_log(1.0f + vt_exp(-std::fabs(x)));
    // The shrinks and threshold round nothing but softshrink's one sum; NaN passes through, and
    // softshrink's x ⊗ 0 keeps the sign of a small negative x, as PyTorch's kernels do.
    case Activation::kHardshrink:
      return x >= -p.alpha && x <= p.alpha ? 0.0f : x;
    case Activation::kSoftshrink:
      return x > p.alpha ? x - p.alpha : (x < -p.alpha ? x + p.alpha : x * 0.0f);
    case Activation::kThreshold:
      return x <= p.threshold ? p.alpha : x;
    case Activation::kExp:
      return vt_exp(x);
    case Activation::kLog:
      return vt_log(x);
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
    case Activation::kSelu:
      return x > 0.0f ? dy * kSeluScale : dy * (kSeluScale * (kSeluAlpha * vt_exp(x)));
    case Activation::kCelu:
      return x > 0.0f ? dy : dy * vt_exp(x / p.alpha);
    case Activation::kMish: {
      const float t = vt_tanh(mish_softplus(x));
      return dy * (t + x * ((1.0f - t * t) * vt_sigmoid(x)));
    }
    case Activation::kLogSigmoid:
      return dy * vt_sigmoid(-x);
    case Activation::kHardshrink:
    case Activation::kSoftshrink:
      return x >= -p.alpha && x <= p.alpha ? 0.0f : dy;
    case Activation::kThreshold:
      return x <= p.threshold ? 0.0f : dy;
    case Activation::kExp:
      return dy * y;
    case Activation::kLog:
      return dy / x;
  }
  return dy;
}

}  // namespace

bool backward_reads_output(Activation f) {
  return f == Activation::kSigmoid || f == Activation::kTanh || f == Activation::kExp;
}

std::string_view activation_name(Activation f, bool backward) {
  static constexpr std::string_view kNames[][2] = {{"sigmoid", "sigmoid_backward"},
                                                   {"tanh", "tanh_backward"},
                                                   {"silu", "silu_backward"},
                                                   {"hardtanh", "hardtanh_backward"},
                                                   {"hardsigmoid", "hardsigmoid_backward"},
                                                   {"hardswish", "hardswish_backward"},
                                                   {"leaky_relu", "leaky_relu_backward"},
                                                   {"elu", "elu_backward"},
                                                   {"gelu_tanh", "gelu_tanh_backward"},
                                                   {"softplus", "softplus_backward"},
                                                   {"selu", "selu_backward"},
                                                   {"celu", "celu_backward"},
                                                   {"mish", "mish_backward"},
                                                   {"log_sigmoid", "log_sigmoid_backward"},
                                                   {"hardshrink", "hardshrink_backward"},
                                                   {"softshrink", "softshrink_backward"},
                                                   {"threshold", "threshold_backward"},
                                                   {"exp", "exp_backward"},
                                                   {"log", "log_backward"}};
  return kNames[static_cast<int>(f)][backward ? 1 : 0];
}

namespace {
// Every parameter of ActivationParams: the trace records them all, whichever f reads.
std::array<trace::Param, 7> activation_params(const ActivationParams& p, std::int64_t n) {
  return {trace::integer("n", n),
          trace::real("min_val", p.min_val),
          trace::real("max_val", p.max_val),
          trace::real("slope", p.slope),
          trace::real("alpha", p.alpha),
          trace::real("beta", p.beta),
          trace::real("threshold", p.threshold)};
}
}  // namespace

void activation(Activation f, const ActivationParams& p, std::int64_t n, const float* x, float* y) {
  const auto params = activation_params(p, n);
  const trace::Operand inputs[] = {trace::f32("x", x, n)};
  trace::Call traced(activation_name(f), params, inputs);
  parallel_for(n, kGrain, [=, &p](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) y[i] = forward_one(f, p, x[i]);
  });
  traced.outputs({trace::f32("y", y, n)});
}

void activation_backward(Activation f, const ActivationParams& p, std::int64_t n, const float* x,
                         const float* y, const float* dy, float* dx) {
  const auto params = activation_params(p, n);
  const trace::Operand inputs[] = {trace::f32_or_none("x", x, n), trace::f32_or_none("y", y, n),
                                   trace::f32("dy", dy, n)};
  trace::Call traced(activation_name(f, true), params, inputs);
  parallel_for(n, kGrain, [=, &p](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      dx[i] = backward_one(f, p, x != nullptr ? x[i] : 0.0f, y != nullptr ? y[i] : 0.0f, dy[i]);
  });
  traced.outputs({trace::f32("dx", dx, n)});
}

}  // namespace vt::kernels
