#include "tests/adversary/operator_cheater.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>

#include "kernels/optim.h"
#include "kernels/pointwise.h"

namespace vt::adversary {
namespace {

float* writable(const kernels::trace::Operand& o) { return const_cast<float*>(o.f32); }

const kernels::trace::Operand* named(std::span<const kernels::trace::Operand> ops,
                                     std::string_view name) {
  for (const auto& o : ops)
    if (o.name == name && o.f32 != nullptr && o.count > 0) return &o;
  return nullptr;
}

}  // namespace

std::string cheat_name(OperatorCheat cheat) {
  switch (cheat) {
    case OperatorCheat::kGeluTanh:
      return "gelu_tanh";
    case OperatorCheat::kSoftmaxWithoutMax:
      return "softmax_without_max";
    case OperatorCheat::kAdamEpsInsideSqrt:
      return "adam_eps_inside_sqrt";
    case OperatorCheat::kSkippedWeightDecay:
      return "skipped_weight_decay";
    case OperatorCheat::kDropoutOtherStream:
      return "dropout_other_stream";
    case OperatorCheat::kNormalOtherStream:
      return "normal_other_stream";
    case OperatorCheat::kBatchNormSequential:
      return "batch_norm_sequential";
    case OperatorCheat::kCorruptedWeight:
      return "corrupted_weight";
    case OperatorCheat::kClippingSkipped:
      return "clipping_skipped";
    case OperatorCheat::kAverageSkipped:
      return "average_skipped";
  }
  return "?";
}

std::string cheated_operator(OperatorCheat cheat, const std::string& optimizer) {
  switch (cheat) {
    case OperatorCheat::kGeluTanh:
      return "gelu";
    case OperatorCheat::kSoftmaxWithoutMax:
      return "softmax";
    case OperatorCheat::kAdamEpsInsideSqrt:
      return "adam_update";
    case OperatorCheat::kDropoutOtherStream:
      return "dropout";
    case OperatorCheat::kNormalOtherStream:
      return "normal";
    case OperatorCheat::kBatchNormSequential:
      return "batch_norm_train";
    case OperatorCheat::kClippingSkipped:
      return "scale_gradient";
    case OperatorCheat::kAverageSkipped:
      return "ema_update";
    case OperatorCheat::kSkippedWeightDecay:
    case OperatorCheat::kCorruptedWeight:
      return optimizer;
  }
  return "?";
}

void OperatorCheater::begin(std::string_view op, std::span<const kernels::trace::Param> params,
                            std::span<const kernels::trace::Operand> inputs) {
  current_ = !done_ && op == target_;
  if (current_) {
    ints_.clear();
    reals_.clear();
    in_.clear();
    for (const auto& p : params) {
      ints_[std::string(p.name)] = p.integer;
      reals_[std::string(p.name)] = p.real;
    }
    for (const auto& o : inputs)
      if (o.f32 != nullptr) in_[std::string(o.name)].assign(o.f32, o.f32 + o.count);
  }
  ForwardingSink::begin(op, params, inputs);
}

void OperatorCheater::end(std::span<const kernels::trace::Operand> outputs) {
  if (!current_) return ForwardingSink::end(outputs);
  current_ = false;
  done_ = true;
  // Every output as the honest kernel left it, to count what the cheat changes.
  std::map<std::string, std::vector<float>> before;
  for (const auto& o : outputs)
    if (o.f32 != nullptr) before[std::string(o.name)].assign(o.f32, o.f32 + o.count);

  switch (cheat_) {
    case OperatorCheat::kGeluTanh: {
      const auto& x = in_["x"];
      float* y = writable(*named(outputs, "y"));
      for (std::size_t i = 0; i < x.size(); ++i) {
        const float v = x[i];
        y[i] = 0.5f * v * (1.0f + std::tanh(0.7978845608f * (v + 0.044715f * v * v * v)));
      }
      break;
    }
    case OperatorCheat::kSoftmaxWithoutMax: {
      const std::int64_t rows = ints_["rows"], width = ints_["width"];
      const bool causal = ints_["causal"] != 0;
      const float divisor = reals_["divisor"];
      const auto& x = in_["x"];
      float* y = writable(*named(outputs, "y"));
      for (std::int64_t r = 0; r < rows; ++r) {
        const std::int64_t n = causal ? r % width + 1 : width;
        float sum = 0.0f;
        for (std::int64_t j = 0; j < n; ++j) sum += std::exp(x[r * width + j] / divisor);
        for (std::int64_t j = 0; j < n; ++j)
          y[r * width + j] = std::exp(x[r * width + j] / divisor) / sum;
      }
      break;
    }
    case OperatorCheat::kAdamEpsInsideSqrt: {
      const auto &p = in_["param"], &g = in_["grad"], &m0 = in_["exp_avg"], &v0 = in_["exp_avg_sq"];
      float* param = writable(*named(outputs, "param"));
      const float b1 = reals_["beta1"], b2 = reals_["beta2"], eps = reals_["eps"];
      for (std::size_t i = 0; i < p.size(); ++i) {
        const float m = m0[i] + (1.0f - b1) * (g[i] - m0[i]);
        const float v = v0[i] * b2 + (1.0f - b2) * (g[i] * g[i]);
        param[i] =
            p[i] - reals_["lr_over_bias1"] * (m / (std::sqrt(v + eps) / reals_["bias2_sqrt"]));
      }
      break;
    }
    case OperatorCheat::kSkippedWeightDecay: {
      std::vector<float> p = in_["param"];
      if (target_ == "adam_update") {
        kernels::AdamStep s;
        s.lr = reals_["lr"];
        s.lr_over_bias1 = reals_["lr_over_bias1"];
        s.bias2_sqrt = reals_["bias2_sqrt"];
        s.beta1 = reals_["beta1"];
        s.beta2 = reals_["beta2"];
        s.eps = reals_["eps"];
        s.decoupled = ints_["decoupled"] != 0;
        s.weight_decay = 0.0f;  // the cheat
        std::vector<float> m = in_["exp_avg"], v = in_["exp_avg_sq"];
        kernels::adam_update(static_cast<std::int64_t>(p.size()), s, p.data(), in_["grad"].data(),
                             m.data(), v.data());
        std::memcpy(writable(*named(outputs, "exp_avg")), m.data(), m.size() * sizeof(float));
        std::memcpy(writable(*named(outputs, "exp_avg_sq")), v.data(), v.size() * sizeof(float));
      } else {
        kernels::SgdStep s;
        s.lr = reals_["lr"];
        s.momentum = reals_["momentum"];
        s.nesterov = ints_["nesterov"] != 0;
        s.first = ints_["first"] != 0;
        s.weight_decay = 0.0f;  // the cheat
        std::vector<float> buffer = in_["buffer"];
        kernels::sgd_update(static_cast<std::int64_t>(p.size()), s, p.data(), in_["grad"].data(),
                            buffer.empty() ? nullptr : buffer.data());
        if (const auto* b = named(outputs, "buffer"))
          std::memcpy(writable(*b), buffer.data(), buffer.size() * sizeof(float));
      }
      std::memcpy(writable(*named(outputs, "param")), p.data(), p.size() * sizeof(float));
      break;
    }
    case OperatorCheat::kDropoutOtherStream: {
      const auto& x = in_["x"];
      kernels::dropout(static_cast<std::int64_t>(x.size()), x.data(), reals_["p"],
                       static_cast<std::uint64_t>(ints_["state"]) + 1,
                       static_cast<std::uint64_t>(ints_["call"]), writable(*named(outputs, "y")));
      break;
    }
    case OperatorCheat::kNormalOtherStream: {
      kernels::normal(ints_["n"], static_cast<std::uint64_t>(ints_["state"]) + 1,
                      static_cast<std::uint64_t>(ints_["call"]), writable(*named(outputs, "y")));
      break;
    }
    case OperatorCheat::kBatchNormSequential: {
      const std::int64_t batch = ints_["batch"], channels = ints_["channels"],
                         spatial = ints_["spatial"];
      const auto& x = in_["x"];
      const auto& w = in_["weight"];
      const auto& bias = in_["bias"];
      const float eps = reals_["eps"];
      float* y = writable(*named(outputs, "y"));
      float* mean = writable(*named(outputs, "mean"));
      float* invstd = writable(*named(outputs, "invstd"));
      const float n = static_cast<float>(batch * spatial);
      for (std::int64_t c = 0; c < channels; ++c) {
        float sum = 0.0f, sq = 0.0f;
        for (std::int64_t b = 0; b < batch; ++b)
          for (std::int64_t s = 0; s < spatial; ++s) sum += x[(b * channels + c) * spatial + s];
        const float m = sum / n;
        for (std::int64_t b = 0; b < batch; ++b)
          for (std::int64_t s = 0; s < spatial; ++s) {
            const float d = x[(b * channels + c) * spatial + s] - m;
            sq += d * d;
          }
        const float inv = 1.0f / std::sqrt(sq / n + eps);
        mean[c] = m;
        invstd[c] = inv;
        for (std::int64_t b = 0; b < batch; ++b)
          for (std::int64_t s = 0; s < spatial; ++s) {
            const std::int64_t i = (b * channels + c) * spatial + s;
            const float v =
                ((x[i] - m) * inv) * (w.empty() ? 1.0f : w[c]) + (bias.empty() ? 0.0f : bias[c]);
            y[i] = ints_["relu"] != 0 && v <= 0.0f ? 0.0f : v;
          }
      }
      break;
    }
    case OperatorCheat::kCorruptedWeight: {
      float* param = writable(*named(outputs, "param"));
      param[0] = std::nextafter(param[0], INFINITY);
      break;
    }
    case OperatorCheat::kClippingSkipped: {
      const auto& x = in_["x"];
      std::copy(x.begin(), x.end(), writable(*named(outputs, "x")));
      break;
    }
    case OperatorCheat::kAverageSkipped: {
      const auto& a = in_["average"];
      std::copy(a.begin(), a.end(), writable(*named(outputs, "average")));
      break;
    }
  }
  for (const auto& o : outputs) {
    if (o.f32 == nullptr) continue;
    const auto& was = before[std::string(o.name)];
    for (std::int64_t i = 0; i < o.count; ++i)
      changed_ += std::bit_cast<std::uint32_t>(was[static_cast<std::size_t>(i)]) !=
                  std::bit_cast<std::uint32_t>(o.f32[i]);
  }
  ForwardingSink::end(outputs);
}

}  // namespace vt::adversary
