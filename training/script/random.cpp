// The veritrain:: operators that draw random numbers (docs/portable.md, "Random operators"): each
// call of a forward pass takes the next call number of the task's dropout stream, so its draws
// are a function of the step and its place in the pass alone. Registered beside
// script/operators.cpp's; the arithmetic they draw from is set per thread by set_script_ops.
#include "training/script/random.h"

#include <torch/library.h>

#include <cmath>
#include <cstdint>

#include "training/model/ops.h"
#include "training/portable/layers.h"
#include "training/portable/operators.h"
#include "training/script/operators.h"

namespace vt::training {
namespace {

thread_local Ops* t_script_ops = nullptr;

using at::IntArrayRef;
using at::Tensor;
using c10::optional;
namespace P = portable;

void next_draw(std::uint64_t& state, std::uint64_t& call, const char* op) {
  TORCH_CHECK(t_script_ops != nullptr && t_script_ops->next_draw(state, call), "portable ", op,
              ": no training pass is running");
}
void float_only(optional<at::ScalarType> dtype, const char* op) {
  TORCH_CHECK(!dtype.has_value() || *dtype == at::kFloat, "portable ", op,
              ": a dtype other than float32");
}
void no_generator(const optional<at::Generator>& generator, const char* op) {
  TORCH_CHECK(!generator.has_value(), "portable ", op,
              ": a generator of its own (the task's stream draws for every call)");
}

Tensor dropout(const Tensor& x, double p, bool train) { return script_dropout(x, p, train); }
Tensor feature_dropout(const Tensor& x, double p, bool train) {
  if (!train || p == 0.0) return x;
  std::uint64_t state = 0, call = 0;
  next_draw(state, call, "feature_dropout");
  return P::feature_dropout(x, p, state, call);
}
// AlphaDropout (SELU networks): PyTorch's _dropout_impl for alpha, step for step, with the keep
// mask a bernoulli_(1 - p) of the dropout stream.
Tensor alpha_dropout(const Tensor& x, double p, bool train) {
  if (!train || p == 0.0) return x;
  if (p == 1.0) return at::mul(x, at::zeros({}, x.options()));
  std::uint64_t state = 0, call = 0;
  next_draw(state, call, "alpha_dropout");
  const Tensor keep = P::bernoulli(x, 1.0 - p, state, call);
  constexpr double kAlpha = 1.7580993408473766;
  const double a = 1.0 / std::sqrt((kAlpha * kAlpha * p + 1) * (1 - p));
  const Tensor b = at::add(at::mul(at::sub(keep, 1), kAlpha * a), kAlpha * a * p);
  return at::add(at::mul(x, at::mul(keep, a)), b);
}

// Draws of the dropout stream of `size`, binary32: P::uniform (in [0, 1)) or P::normal.
using Draw = Tensor (*)(IntArrayRef, std::uint64_t, std::uint64_t);
Tensor draws(Draw draw, IntArrayRef size, optional<at::ScalarType> dtype, const char* op) {
  float_only(dtype, op);
  std::uint64_t state = 0, call = 0;
  next_draw(state, call, op);
  return draw(size, state, call);
}
Tensor rand(IntArrayRef size, optional<at::ScalarType> dtype, optional<at::Layout> /*layout*/,
            optional<at::Device> /*device*/, optional<bool> /*pin_memory*/) {
  return draws(&P::uniform, size, dtype, "rand");
}
Tensor rand_like(const Tensor& x, optional<at::ScalarType> dtype, optional<at::Layout> /*layout*/,
                 optional<at::Device> /*device*/, optional<bool> /*pin_memory*/,
                 optional<at::MemoryFormat> /*memory_format*/) {
  return draws(&P::uniform, x.sizes(), dtype.has_value() ? dtype : x.scalar_type(), "rand_like");
}
Tensor randn(IntArrayRef size, optional<at::ScalarType> dtype, optional<at::Layout> /*layout*/,
             optional<at::Device> /*device*/, optional<bool> /*pin_memory*/) {
  return draws(&P::normal, size, dtype, "randn");
}
Tensor randn_like(const Tensor& x, optional<at::ScalarType> dtype, optional<at::Layout> /*layout*/,
                  optional<at::Device> /*device*/, optional<bool> /*pin_memory*/,
                  optional<at::MemoryFormat> /*memory_format*/) {
  return draws(&P::normal, x.sizes(), dtype.has_value() ? dtype : x.scalar_type(), "randn_like");
}
// An in-place draw on a tensor nothing else reads: d ⊗ f32(scale) ⊕ f32(shift).
Tensor scaled_draws(Draw draw, const Tensor& x, float scale, float shift,
                    const optional<at::Generator>& generator, const char* op) {
  no_generator(generator, op);
  return at::add(at::mul(draws(draw, x.sizes(), x.scalar_type(), op), scale), shift);
}
// x.uniform_(from, to): u ⊗ f32(to − from) ⊕ f32(from); x.normal_(mean, std): z ⊗ f32(std) ⊕
// f32(mean). Here and below, generators by value: the types of the registered schemas.
Tensor uniform(const Tensor& x, double from, double to,
               optional<at::Generator> generator) {  // NOLINT(performance-unnecessary-value-param)
  return scaled_draws(&P::uniform, x, static_cast<float>(to - from), static_cast<float>(from),
                      generator, "uniform_");
}
Tensor normal(const Tensor& x, double mean, double std,
              optional<at::Generator> generator) {  // NOLINT(performance-unnecessary-value-param)
  return scaled_draws(&P::normal, x, static_cast<float>(std), static_cast<float>(mean), generator,
                      "normal_");
}

// RReLU: in training `x > 0 ? x : x ⊗ r` with a slope r = lower ⊕ (upper ⊖ lower) ⊗ u for every
// element, u from the dropout stream; otherwise leaky_relu at the mean slope, as PyTorch's.
Tensor rrelu(const Tensor& x, const at::Scalar& lower, const at::Scalar& upper, bool training,
             optional<at::Generator> generator) {  // NOLINT(performance-unnecessary-value-param)
  no_generator(generator, "rrelu");
  const double lo = lower.toDouble(), hi = upper.toDouble();
  if (!training) {
    kernels::ActivationParams p;
    p.slope = static_cast<float>((lo + hi) / 2);
    return P::activation(x, kernels::Activation::kLeakyRelu, p);
  }
  const Tensor slope =
      at::add(at::mul(draws(&P::uniform, x.sizes(), c10::nullopt, "rrelu"), hi - lo), lo);
  return at::where(x > 0, x, at::mul(x, slope));
}
Tensor bernoulli(
    const Tensor& x, double p,
    optional<at::Generator> generator) {  // NOLINT(performance-unnecessary-value-param)
  no_generator(generator, "bernoulli_");
  std::uint64_t state = 0, call = 0;
  next_draw(state, call, "bernoulli_");
  return P::bernoulli(x, p, state, call);
}
// torch.randint(low, high, size): int64 in [low, high), a whole 64-bit draw each.
Tensor randint_low(int64_t low, int64_t high, IntArrayRef size, optional<at::ScalarType> dtype,
                   optional<at::Layout> /*layout*/, optional<at::Device> /*device*/,
                   optional<bool> /*pin_memory*/) {
  TORCH_CHECK(!dtype.has_value() || *dtype == at::kLong,
              "portable randint: a dtype other than int64 (draw int64, then convert)");
  TORCH_CHECK(high > low, "portable randint: an empty range [", low, ", ", high, ")");
  std::uint64_t state = 0, call = 0;
  next_draw(state, call, "randint");
  return P::randint(low, high, size, state, call);
}
Tensor randint(int64_t high, IntArrayRef size, optional<at::ScalarType> dtype,
               optional<at::Layout> layout, optional<at::Device> device,
               optional<bool> pin_memory) {
  return randint_low(0, high, size, dtype, layout, device, pin_memory);
}

// torch.bernoulli(p): a draw a position, against that position's probability.
Tensor bernoulli_of(
    const Tensor& p,
    optional<at::Generator> generator) {  // NOLINT(performance-unnecessary-value-param)
  no_generator(generator, "bernoulli");
  float_only(p.scalar_type(), "bernoulli");
  std::uint64_t state = 0, call = 0;
  next_draw(state, call, "bernoulli");
  return P::bernoulli_of(p, state, call);
}

}  // namespace

TORCH_LIBRARY_IMPL(veritrain, CompositeImplicitAutograd, m) {
  m.impl("dropout", &dropout);
  m.impl("feature_dropout", &feature_dropout);
  m.impl("alpha_dropout", &alpha_dropout);
  m.impl("bernoulli", &bernoulli);
  m.impl("bernoulli_of", &bernoulli_of);
  m.impl("randint", &randint);
  m.impl("randint_low", &randint_low);
  m.impl("rand", &rand);
  m.impl("rand_like", &rand_like);
  m.impl("uniform", &uniform);
  m.impl("randn", &randn);
  m.impl("randn_like", &randn_like);
  m.impl("normal", &normal);
  m.impl("rrelu", &rrelu);
}

Tensor script_dropout(const Tensor& x, double p, bool train) {
  if (!train || p == 0.0) return x;
  TORCH_CHECK(t_script_ops != nullptr, "portable dropout: no training pass is running");
  return t_script_ops->dropout(x, p, train);
}

void set_script_ops(Ops* ops) { t_script_ops = ops; }

}  // namespace vt::training
