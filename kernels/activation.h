#pragma once
// Element-wise activations in the portable arithmetic (docs/portable.md, "More functions"),
// forward and backward. Threads and vector lanes split elements: no value depends on another.

#include <cstdint>
#include <string_view>

namespace vt::kernels {

enum class Activation {
  kSigmoid,
  kTanh,
  kSilu,
  kHardtanh,
  kHardsigmoid,
  kHardswish,
  kLeakyRelu,
  kElu,
  kGeluTanh,
  kSoftplus,
  kSelu,
  kCelu,
  kMish,
  kLogSigmoid,
  kHardshrink,
  kSoftshrink,
  kThreshold,
  kExp,
  kLog,
};

// The activation's parameters (binary32): hardtanh's bounds, leaky_relu's slope, elu's alpha,
// softplus's beta and threshold, celu's alpha, the shrinks' lambda (as alpha), threshold's
// threshold and value (as alpha). The others read none (selu's constants are its own).
struct ActivationParams {
  float min_val = -1.0f, max_val = 1.0f;
  float slope = 0.01f;
  float alpha = 1.0f;
  float beta = 1.0f, threshold = 20.0f;
};

// y = f(x).
void activation(Activation f, const ActivationParams& p, std::int64_t n, const float* x, float* y);
// dx from dy and what the backward reads: the output y for sigmoid, tanh and exp (docs: "from
// the output"), the input x for the others.
void activation_backward(Activation f, const ActivationParams& p, std::int64_t n, const float* x,
                         const float* y, const float* dy, float* dx);

// Whether the backward of f reads its output (sigmoid, tanh, exp) rather than its input.
bool backward_reads_output(Activation f);

// Its name in step traces (docs/dispute.md): "sigmoid", ..., "log"; the backward's is the
// name with "_backward". Every function, in enum order, for whoever needs them all.
std::string_view activation_name(Activation f, bool backward = false);
inline constexpr Activation kActivations[] = {
    Activation::kSigmoid,    Activation::kTanh,        Activation::kSilu,
    Activation::kHardtanh,   Activation::kHardsigmoid, Activation::kHardswish,
    Activation::kLeakyRelu,  Activation::kElu,         Activation::kGeluTanh,
    Activation::kSoftplus,   Activation::kSelu,        Activation::kCelu,
    Activation::kMish,       Activation::kLogSigmoid,  Activation::kHardshrink,
    Activation::kSoftshrink, Activation::kThreshold,   Activation::kExp,
    Activation::kLog};

}  // namespace vt::kernels
