// The zoo's operators in LibTorch's arithmetic (the modules' own forward) and in the portable
// one (training/portable/functions.cpp), and the portable initial weights.
#include "training/model/ops.h"

#include <c10/core/GradMode.h>
#include <torch/version.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "kernels/init.h"
#include "kernels/scalar.h"
#include "training/model/network.h"
#include "training/portable/functions.h"
#include "training/portable/layers.h"

namespace vt::training {
namespace {

namespace nn = torch::nn;

class TorchOps final : public Ops {
 public:
  bool portable() const override { return false; }
  at::Tensor linear(nn::LinearImpl& m, const at::Tensor& x) override { return m.forward(x); }
  at::Tensor conv2d(nn::Conv2dImpl& m, const at::Tensor& x) override { return m.forward(x); }
  at::Tensor conv3d(nn::Conv3dImpl& m, const at::Tensor& x) override { return m.forward(x); }
  at::Tensor batch_norm(nn::BatchNorm2dImpl& m, const at::Tensor& x) override {
    return m.forward(x);
  }
  at::Tensor layer_norm(nn::LayerNormImpl& m, const at::Tensor& x) override { return m.forward(x); }
  at::Tensor embed(nn::EmbeddingImpl& tok, nn::EmbeddingImpl& pos,
                   const at::Tensor& tokens) override {
    auto positions = torch::arange(tokens.size(1), tokens.options());
    return tok.forward(tokens) + pos.forward(positions).unsqueeze(0);
  }
  at::Tensor dropout(nn::DropoutImpl& m, const at::Tensor& x) override { return m.forward(x); }
  at::Tensor dropout(const at::Tensor& x, double p, bool training) override {
    return torch::dropout(x, p, training);
  }
  at::Tensor relu(const at::Tensor& x) override { return torch::relu(x); }
  at::Tensor gelu(const at::Tensor& x) override { return torch::gelu(x); }
  at::Tensor spatial_mean(const at::Tensor& x) override { return x.mean({2, 3}); }
  at::Tensor attention(const at::Tensor& qkv, std::int64_t heads, nn::DropoutImpl& drop) override {
    const auto b = qkv.size(0), t = qkv.size(1), d = qkv.size(2) / 3, dh = d / heads;
    auto parts = qkv.view({b, t, 3, heads, dh}).permute({2, 0, 3, 1, 4});
    auto q = parts[0], k = parts[1], v = parts[2];
    const auto mask = torch::ones({t, t}, qkv.options().dtype(torch::kBool)).triu(1);
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(dh));
    scores = scores.masked_fill(mask, -std::numeric_limits<float>::infinity());
    auto attn = torch::matmul(drop.forward(torch::softmax(scores, -1)), v);
    return attn.transpose(1, 2).reshape({b, t, d});
  }
  at::Tensor loss(const LossSpec& loss, const at::Tensor& output,
                  const at::Tensor& target) override {
    return compute_loss(loss, output, target);
  }
};

template <std::size_t D, typename Options>
std::vector<std::int64_t> padding_of(const Options& o) {
#if TORCH_VERSION_MAJOR >= 2
  const auto& padding = std::get<torch::ExpandingArray<D>>(o.padding());
#else
  const auto& padding = c10::get<torch::ExpandingArray<D>>(o.padding());
#endif
  return {(*padding).begin(), (*padding).end()};
}

template <std::size_t D>
std::vector<std::int64_t> stride_of(const torch::ExpandingArray<D>& stride) {
  return {(*stride).begin(), (*stride).end()};
}

class PortableOps final : public Ops {
 public:
  explicit PortableOps(std::uint64_t seed) : seed_(seed) { begin_forward(0, 0); }
  bool portable() const override { return true; }

  at::Tensor linear(nn::LinearImpl& m, const at::Tensor& x) override {
    return portable::linear(x, m.weight, m.bias);
  }
  at::Tensor conv2d(nn::Conv2dImpl& m, const at::Tensor& x) override {
    return portable::conv(x, m.weight, m.bias, stride_of<2>(m.options.stride()),
                          padding_of<2>(m.options));
  }
  at::Tensor conv3d(nn::Conv3dImpl& m, const at::Tensor& x) override {
    return portable::conv(x, m.weight, m.bias, stride_of<3>(m.options.stride()),
                          padding_of<3>(m.options));
  }
  at::Tensor batch_norm(nn::BatchNorm2dImpl& m, const at::Tensor& x) override {
    return norm(m, x, /*relu=*/false);
  }
  at::Tensor batch_norm_relu(nn::BatchNorm2dImpl& m, const at::Tensor& x) override {
    return norm(m, x, /*relu=*/true);
  }
  at::Tensor layer_norm(nn::LayerNormImpl& m, const at::Tensor& x) override {
    return portable::layer_norm(x, m.weight, m.bias, m.options.eps());
  }
  at::Tensor embed(nn::EmbeddingImpl& tok, nn::EmbeddingImpl& pos,
                   const at::Tensor& tokens) override {
    auto positions = torch::arange(tokens.size(1), tokens.options());
    return portable::add_rows(portable::embedding(tokens, tok.weight),
                              portable::embedding(positions, pos.weight));
  }
  using Ops::dropout;
  at::Tensor dropout(const at::Tensor& x, double p, bool training) override {
    if (!training || p == 0.0) return x;
    return portable::dropout(x, p, dropout_state_, calls_++);
  }
  bool next_draw(std::uint64_t& state, std::uint64_t& call) override {
    state = dropout_state_;
    call = calls_++;
    return true;
  }
  std::uint64_t draw_position() const override { return calls_; }
  void set_draw_position(std::uint64_t position) override { calls_ = position; }
  at::Tensor relu(const at::Tensor& x) override { return portable::relu(x); }
  at::Tensor gelu(const at::Tensor& x) override { return portable::gelu(x); }
  at::Tensor spatial_mean(const at::Tensor& x) override { return portable::spatial_mean(x); }
  at::Tensor attention(const at::Tensor& qkv, std::int64_t heads, nn::DropoutImpl& drop) override {
    const auto dh = qkv.size(2) / 3 / heads;
    // √d in binary64, rounded once to binary32 (docs/portable.md, "Attention").
    const double divisor = static_cast<float>(std::sqrt(static_cast<double>(dh)));
    // The dropout draw is taken where the separate operators took it: after the softmax, the
    // pass's only draw inside attention.
    const bool drops = drop.is_training() && drop.options.p() != 0.0;
    const std::uint64_t call = drops ? calls_++ : 0;
    return portable::attention(qkv, heads, divisor, drops ? drop.options.p() : 0.0, dropout_state_,
                               call);
  }
  at::Tensor loss(const LossSpec& loss, const at::Tensor& output,
                  const at::Tensor& target) override {
    if (loss.name == "mse") return portable::mse(output, target);
    // (batch, time, vocab) against (batch, time); (batch, classes, positions...) against (batch,
    // positions...), as rows in (batch, position) order: the move of the class dimension is a
    // copy, which rounds nothing.
    const bool tokens = output.dim() == 3 && target.dim() == 2;
    const bool positions = classes_dim(target) == 1;
    const at::Tensor logits = tokens ? output.reshape({-1, output.size(-1)})
                              : positions
                                  ? output.movedim(1, -1).contiguous().reshape({-1, output.size(1)})
                                  : output;
    const at::Tensor classes = tokens || positions ? target.reshape({-1}) : target;
    if (loss.label_smoothing > 0.0)
      return portable::cross_entropy_smoothed(logits, classes, loss.label_smoothing);
    return portable::cross_entropy(logits, classes);
  }
  void begin_forward(std::int64_t global_step, std::int64_t group) override {
    dropout_state_ = kernels::stream_state(
        seed_, 5,
        (static_cast<std::uint64_t>(global_step) << 20) ^ static_cast<std::uint64_t>(group));
    calls_ = 0;
  }

 private:
  at::Tensor norm(nn::BatchNorm2dImpl& m, const at::Tensor& x, bool relu) {
    // As BatchNorm2d's own forward: the counter moves with every training pass.
    if (m.is_training()) {
      c10::NoGradGuard no_grad;
      m.num_batches_tracked += 1;
    }
    return portable::batch_norm(x, m.weight, m.bias, m.running_mean, m.running_var, m.is_training(),
                                m.options.momentum().value(), m.options.eps(), relu);
  }

  std::uint64_t seed_;
  std::uint64_t dropout_state_ = 0;
  std::uint64_t calls_ = 0;
};

enum class InitKind { kFanIn, kNormal, kOnes, kZeros };

// Each parameter's rule, by the module that holds it (docs/portable.md, "Initial weights").
std::map<std::string, std::pair<InitKind, std::int64_t>> init_rules(nn::Module& root) {
  std::map<std::string, std::pair<InitKind, std::int64_t>> rules;
  for (const auto& item : root.named_modules("", /*include_self=*/true)) {
    const std::string prefix = item.key().empty() ? "" : item.key() + ".";
    nn::Module& m = *item.value();
    auto weight_fan_in = [&](const at::Tensor& w) { return w.numel() / w.size(0); };
    if (auto* lin = m.as<nn::Linear>()) {
      rules[prefix + "weight"] = {InitKind::kFanIn, weight_fan_in(lin->weight)};
      rules[prefix + "bias"] = {InitKind::kFanIn, weight_fan_in(lin->weight)};
    } else if (auto* c2 = m.as<nn::Conv2d>()) {
      rules[prefix + "weight"] = {InitKind::kFanIn, weight_fan_in(c2->weight)};
      rules[prefix + "bias"] = {InitKind::kFanIn, weight_fan_in(c2->weight)};
    } else if (auto* c3 = m.as<nn::Conv3d>()) {
      rules[prefix + "weight"] = {InitKind::kFanIn, weight_fan_in(c3->weight)};
      rules[prefix + "bias"] = {InitKind::kFanIn, weight_fan_in(c3->weight)};
    } else if (m.as<nn::Embedding>()) {
      rules[prefix + "weight"] = {InitKind::kNormal, 0};
    } else if (m.as<nn::BatchNorm2d>() || m.as<nn::LayerNorm>()) {
      rules[prefix + "weight"] = {InitKind::kOnes, 0};
      rules[prefix + "bias"] = {InitKind::kZeros, 0};
    }
  }
  return rules;
}

}  // namespace

std::unique_ptr<Ops> torch_ops() { return std::make_unique<TorchOps>(); }
std::unique_ptr<Ops> portable_ops(std::uint64_t seed) {
  return std::make_unique<PortableOps>(seed);
}

void portable_init(nn::Module& module, std::uint64_t seed) {
  const auto rules = init_rules(module);
  std::vector<std::pair<std::string, at::Tensor>> params;
  for (const auto& item : module.named_parameters()) params.emplace_back(item.key(), item.value());
  std::sort(params.begin(), params.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  c10::NoGradGuard no_grad;
  for (std::size_t i = 0; i < params.size(); ++i) {
    const auto& [name, p] = params[i];
    TORCH_CHECK(p.scalar_type() == at::kFloat && p.is_contiguous() && p.device().is_cpu(),
                "portable init: ", name, " is not a contiguous float32 CPU tensor");
    auto rule = rules.find(name);
    TORCH_CHECK(rule != rules.end(), "portable init: no rule for parameter ", name);
    const std::uint64_t state = kernels::stream_state(seed, 6, i);
    float* out = p.data_ptr<float>();
    switch (rule->second.first) {
      case InitKind::kFanIn:
        kernels::init_uniform_fan_in(p.numel(), state, rule->second.second, out);
        break;
      case InitKind::kNormal:
        kernels::init_normal(p.numel(), state, out);
        break;
      case InitKind::kOnes:
        kernels::fill(p.numel(), 1.0f, out);
        break;
      case InitKind::kZeros:
        kernels::fill(p.numel(), 0.0f, out);
        break;
    }
  }
}

}  // namespace vt::training
