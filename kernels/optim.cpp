#include "kernels/optim.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/trace.h"

namespace vt::kernels {
namespace {

constexpr std::int64_t kGrain = 16384;

// elements(tensor, begin, end) over every element of every tensor, as one pass: one parallel
// region for all of them, threads taking contiguous runs of the concatenation.
template <typename Tensor, typename Elements>
void one_pass(std::span<const Tensor> tensors, const Elements& elements) {
  // starts[i]: the first element of tensor i in the concatenation.
  std::vector<std::int64_t> starts(tensors.size() + 1, 0);
  for (std::size_t i = 0; i < tensors.size(); ++i) starts[i + 1] = starts[i] + tensors[i].n;
  parallel_for(starts.back(), kGrain, [&](std::int64_t begin, std::int64_t end) {
    auto i = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), begin) -
                                      starts.begin() - 1);
    for (; i < tensors.size() && starts[i] < end; ++i) {
      const std::int64_t from = std::max(begin, starts[i]) - starts[i];
      const std::int64_t to = std::min(end, starts[i + 1]) - starts[i];
      if (from < to) elements(tensors[i], from, to);
    }
  });
}

// sgd_update's arithmetic on elements [begin, end) of one tensor, each option a compile-time
// branch and the buffers unaliased, so that GCC vectorises the loop: each lane runs the scalar
// sequence (no contraction in this file), same bits.
template <bool kDecay, bool kMomentum, bool kFirst, bool kNesterov>
void sgd_loop(const SgdStep& s, const SgdTensor& t, std::int64_t begin, std::int64_t end) {
  const float lr = s.lr, momentum = s.momentum, weight_decay = s.weight_decay;
  float* __restrict p = t.param;
  const float* __restrict g = t.grad;
  float* __restrict b = t.buffer;
  for (std::int64_t i = begin; i < end; ++i) {
    float d = g[i];
    if constexpr (kDecay) d = d + weight_decay * p[i];
    if constexpr (kMomentum) {
      const float bi = kFirst ? d : b[i] * momentum + d;
      b[i] = bi;
      d = kNesterov ? d + momentum * bi : bi;
    }
    p[i] = p[i] - lr * d;
  }
}

// sgd_loop for the options in the bits of `Options` (8: weight decay, 4: momentum, 2: first
// step, 1: Nesterov), one instantiation each, chosen by index.
using SgdLoop = void (*)(const SgdStep&, const SgdTensor&, std::int64_t, std::int64_t);
template <std::size_t... Options>
constexpr std::array<SgdLoop, sizeof...(Options)> sgd_loops(std::index_sequence<Options...>) {
  return {
      &sgd_loop<(Options & 8) != 0, (Options & 4) != 0, (Options & 2) != 0, (Options & 1) != 0>...};
}
constexpr auto kSgdLoops = sgd_loops(std::make_index_sequence<16>{});

void sgd_elements(const SgdStep& s, const SgdTensor& t, std::int64_t begin, std::int64_t end) {
  const std::size_t options = (s.weight_decay != 0.0f ? 8 : 0) | (t.buffer != nullptr ? 4 : 0) |
                              (s.first ? 2 : 0) | (s.nesterov ? 1 : 0);
  kSgdLoops[options](s, t, begin, end);
}

}  // namespace

void sgd_update(std::int64_t n, const SgdStep& s, float* param, const float* grad, float* buffer) {
  trace::Call traced(
      "sgd_update",
      {trace::integer("n", n), trace::real("lr", s.lr), trace::real("momentum", s.momentum),
       trace::real("weight_decay", s.weight_decay), trace::integer("nesterov", s.nesterov),
       trace::integer("first", s.first)},
      {trace::f32("param", param, n), trace::f32("grad", grad, n),
       trace::f32_or_none("buffer", buffer, n)});
  const SgdTensor t{n, param, grad, buffer};
  parallel_for(n, kGrain,
               [&](std::int64_t begin, std::int64_t end) { sgd_elements(s, t, begin, end); });
  traced.outputs({trace::f32("param", param, n), trace::f32_or_none("buffer", buffer, n)});
}

void sgd_update(std::span<const SgdTensor> tensors, const SgdStep& s) {
  if (trace::active()) {
    for (const SgdTensor& t : tensors) sgd_update(t.n, s, t.param, t.grad, t.buffer);
    return;
  }
  one_pass(tensors, [&](const SgdTensor& t, std::int64_t begin, std::int64_t end) {
    sgd_elements(s, t, begin, end);
  });
}

namespace {

// adam_update's arithmetic on elements [begin, end) of one tensor. The step's scalars in locals
// and the buffers unaliased, so that GCC vectorises the loop: each lane runs the scalar sequence
// below (no contraction in this file), same bits.
void adam_elements(const AdamStep& s, const AdamTensor& t, std::int64_t begin, std::int64_t end) {
  const float decay = s.decoupled ? 1.0f - s.lr * s.weight_decay : 1.0f;
  const float l2 = s.decoupled ? 0.0f : s.weight_decay;
  const float beta2 = s.beta2, w1 = 1.0f - s.beta1, w2 = 1.0f - s.beta2;
  const float bias2_sqrt = s.bias2_sqrt, eps = s.eps, step = s.lr_over_bias1;
  const bool decoupled = s.decoupled, coupled = !s.decoupled && s.weight_decay != 0.0f;
  float* __restrict p = t.param;
  const float* __restrict g_in = t.grad;
  float* __restrict m = t.exp_avg;
  float* __restrict v = t.exp_avg_sq;
  const auto run = [&](auto decoupled_decay, auto coupled_decay) {
    for (std::int64_t i = begin; i < end; ++i) {
      float g = g_in[i];
      float w = p[i];
      if constexpr (decltype(decoupled_decay)::value) w = w * decay;
      if constexpr (decltype(coupled_decay)::value) g = g + l2 * w;
      const float mi = m[i] + w1 * (g - m[i]);
      const float vi = v[i] * beta2 + w2 * (g * g);
      m[i] = mi;
      v[i] = vi;
      const float denom = std::sqrt(vi) / bias2_sqrt + eps;
      p[i] = w - step * (mi / denom);
    }
  };
  if (decoupled) {
    run(std::true_type{}, std::false_type{});
  } else if (coupled) {
    run(std::false_type{}, std::true_type{});
  } else {
    run(std::false_type{}, std::false_type{});
  }
}

}  // namespace

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
  const AdamTensor t{n, param, grad, exp_avg, exp_avg_sq};
  parallel_for(n, kGrain,
               [&](std::int64_t begin, std::int64_t end) { adam_elements(s, t, begin, end); });
  traced.outputs({trace::f32("param", param, n), trace::f32("exp_avg", exp_avg, n),
                  trace::f32("exp_avg_sq", exp_avg_sq, n)});
}

void adam_update(std::span<const AdamTensor> tensors, const AdamStep& s) {
  if (trace::active()) {
    for (const AdamTensor& t : tensors)
      adam_update(t.n, s, t.param, t.grad, t.exp_avg, t.exp_avg_sq);
    return;
  }
  one_pass(tensors, [&](const AdamTensor& t, std::int64_t begin, std::int64_t end) {
    adam_elements(s, t, begin, end);
  });
}

namespace {

void ema_elements(const EmaTensor& t, float decay, float one_minus_decay, std::int64_t begin,
                  std::int64_t end) {
  float* __restrict a = t.average;
  const float* __restrict x = t.live;
  for (std::int64_t i = begin; i < end; ++i) a[i] = a[i] * decay + x[i] * one_minus_decay;
}

}  // namespace

void ema_update(std::int64_t n, float* average, const float* live, float decay,
                float one_minus_decay) {
  trace::Call traced("ema_update",
                     {trace::integer("n", n), trace::real("decay", decay),
                      trace::real("one_minus_decay", one_minus_decay)},
                     {trace::f32("average", average, n), trace::f32("live", live, n)});
  const EmaTensor t{n, average, live};
  parallel_for(n, kGrain, [&](std::int64_t begin, std::int64_t end) {
    ema_elements(t, decay, one_minus_decay, begin, end);
  });
  traced.outputs({trace::f32("average", average, n)});
}

void ema_update(std::span<const EmaTensor> tensors, float decay, float one_minus_decay) {
  if (trace::active()) {
    for (const EmaTensor& t : tensors) ema_update(t.n, t.average, t.live, decay, one_minus_decay);
    return;
  }
  one_pass(tensors, [&](const EmaTensor& t, std::int64_t begin, std::int64_t end) {
    ema_elements(t, decay, one_minus_decay, begin, end);
  });
}

}  // namespace vt::kernels
