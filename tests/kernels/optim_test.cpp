// The optimizers' one pass over all of a model's tensors against their update tensor by tensor
// and against the documented step (docs/portable.md, "Optimizers"), at 1 to 3 threads.
#include "kernels/optim.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/trace.h"
#include "tests/kernels/kernel_test_util.h"

namespace vt::kernels {
namespace {

// One optimizer tensor: parameter, gradient and two state buffers (Adam's moments, the second
// one >= 0; SGD uses m as its momentum buffer).
struct TensorState {
  std::vector<float> param, grad, m, v;
  TensorState(std::size_t n, std::uint32_t seed)
      : param(random_floats(n, seed)),
        grad(random_floats(n, seed + 1)),
        m(random_floats(n, seed + 2)),
        v(random_floats(n, seed + 3)) {
    for (float& x : v) x = x * x;
  }
  AdamTensor tensor() { return {std::ssize(param), param.data(), grad.data(), m.data(), v.data()}; }
  bool operator==(const TensorState& o) const {
    return same_bits(param, o.param) && same_bits(m, o.m) && same_bits(v, o.v);
  }
};

std::vector<AdamTensor> tensors_of(std::vector<TensorState>& states) {
  std::vector<AdamTensor> out;
  out.reserve(states.size());
  for (TensorState& t : states) out.push_back(t.tensor());
  return out;
}

class CountingSink : public trace::Sink {
 public:
  void begin(std::string_view op, std::span<const trace::Param>,
             std::span<const trace::Operand> inputs) override {
    ops.emplace_back(op);
    sizes.push_back(inputs.front().count);
  }
  void end(std::span<const trace::Operand>) override {}
  std::vector<std::string> ops;
  std::vector<std::int64_t> sizes;
};

TEST(Adam, OnePassOverAllTensorsIsEachTensorsUpdate) {
  // Sizes on both sides of the threads' grain (16384 elements), one empty, one of one element.
  const std::vector<std::size_t> sizes = {7, 1, 16387, 0, 64, 40000, 3};
  for (const bool decoupled : {true, false}) {
    AdamStep s;
    s.lr = 3e-3f;
    s.lr_over_bias1 = 0.0297f;
    s.bias2_sqrt = 0.2179f;
    s.weight_decay = 0.01f;
    s.beta2 = 0.95f;
    s.decoupled = decoupled;
    std::vector<TensorState> each;
    for (std::size_t i = 0; i < sizes.size(); ++i)
      each.emplace_back(sizes[i], static_cast<std::uint32_t>(40 + 4 * i));
    const std::vector<TensorState> start = each;
    set_threads(1);
    for (TensorState& t : each) {
      const AdamTensor a = t.tensor();
      adam_update(a.n, s, a.param, a.grad, a.exp_avg, a.exp_avg_sq);
    }
    for (const int threads : {1, 2, 3}) {
      set_threads(threads);
      std::vector<TensorState> all = start;
      adam_update(tensors_of(all), s);
      for (std::size_t i = 0; i < all.size(); ++i)
        EXPECT_TRUE(all[i] == each[i])
            << "tensor " << i << ", decoupled " << decoupled << ", " << threads << " threads";
    }
    // Traced, it is one adam_update call per tensor, in order, with the same results.
    std::vector<TensorState> traced = start;
    const std::vector<AdamTensor> tensors = tensors_of(traced);
    CountingSink sink;
    trace::install(&sink);
    adam_update(tensors, s);
    trace::install(nullptr);
    EXPECT_EQ(sink.ops, std::vector<std::string>(sizes.size(), "adam_update"));
    EXPECT_EQ(sink.sizes, std::vector<std::int64_t>(sizes.begin(), sizes.end()));
    for (std::size_t i = 0; i < traced.size(); ++i) EXPECT_TRUE(traced[i] == each[i]);
  }
  set_threads(1);
}

// docs/portable.md's SGD step for one element, each operation rounded (volatile: no contraction).
float sgd_reference(const SgdStep& s, float& param, float grad, float* buffer) {
  volatile float d = grad;
  if (s.weight_decay != 0.0f) {
    volatile float decay = s.weight_decay * param;
    d = d + decay;
  }
  if (buffer != nullptr) {
    volatile float kept = *buffer * s.momentum;
    *buffer = s.first ? static_cast<float>(d) : kept + d;
    volatile float ahead = s.momentum * *buffer;
    d = s.nesterov ? d + ahead : *buffer;
  }
  volatile float change = s.lr * d;
  param = param - change;
  return param;
}

TEST(Sgd, EveryOptionIsTheDocumentedStepInOnePassOrTensorByTensor) {
  const std::vector<std::size_t> sizes = {7, 1, 16387, 0, 64, 40000, 3};
  for (int options = 0; options < 16; ++options) {
    SgdStep s;
    s.lr = 0.05f;
    s.momentum = 0.9f;
    s.weight_decay = (options & 1) != 0 ? 5e-4f : 0.0f;
    const bool momentum = (options & 2) != 0;
    s.first = (options & 4) != 0;
    s.nesterov = (options & 8) != 0;
    // The reference, element by element; state: [param, grad, buffer] per tensor.
    std::vector<TensorState> want;
    for (std::size_t i = 0; i < sizes.size(); ++i)
      want.emplace_back(sizes[i], static_cast<std::uint32_t>(90 + 4 * i));
    const std::vector<TensorState> start = want;
    for (TensorState& t : want) {
      for (std::size_t e = 0; e < t.param.size(); ++e)
        sgd_reference(s, t.param[e], t.grad[e], momentum ? &t.m[e] : nullptr);
    }
    const auto tensors_from = [&](std::vector<TensorState>& states) {
      std::vector<SgdTensor> out;
      out.reserve(states.size());
      for (TensorState& t : states) {
        out.push_back(
            {std::ssize(t.param), t.param.data(), t.grad.data(), momentum ? t.m.data() : nullptr});
      }
      return out;
    };
    for (const int threads : {1, 2, 3}) {
      set_threads(threads);
      std::vector<TensorState> all = start, each = start;
      sgd_update(tensors_from(all), s);
      for (const SgdTensor& t : tensors_from(each)) sgd_update(t.n, s, t.param, t.grad, t.buffer);
      for (std::size_t i = 0; i < all.size(); ++i) {
        EXPECT_TRUE(same_bits(all[i].param, want[i].param) && same_bits(all[i].m, want[i].m))
            << "one pass, tensor " << i << ", options " << options << ", " << threads << " threads";
        EXPECT_TRUE(same_bits(each[i].param, want[i].param) && same_bits(each[i].m, want[i].m))
            << "tensor by tensor, tensor " << i << ", options " << options;
      }
    }
  }
  set_threads(1);
}

}  // namespace
}  // namespace vt::kernels
