// The model zoo (mlp, cnn, conv3d, gpt) as LibTorch modules; user TorchScript modules are in
// training/script/module.cpp.
#include "training/model/models.h"

#include <torch/torch.h>

#include <cmath>
#include <cstdint>

#include "kernels/trace.h"
#include "training/model/ops.h"

namespace vt::training {
namespace {
namespace nn = torch::nn;
namespace F = torch::nn::functional;

// Every model computes through an Ops (training/model/ops.h): LibTorch's arithmetic runs
// each module's own forward(), the portable one veritrain's kernels. Parameter names and
// shapes are the modules' either way, so both arithmetics share the snapshot layout.

// --- mlp -------------------------------------------------------------------------------------
struct MlpImpl : nn::Module {
  MlpImpl(Ops& ops, std::int64_t in, std::int64_t hidden, std::int64_t layers, std::int64_t classes)
      : ops(ops) {
    std::int64_t width = in;
    for (std::int64_t i = 0; i < layers; ++i) {
      body->push_back(nn::Linear(width, hidden));
      body->push_back(nn::ReLU());
      width = hidden;
    }
    body->push_back(nn::Linear(width, classes));
    register_module("body", body);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = x.flatten(1);
    for (const auto& layer : body->children()) {
      auto* linear = layer->as<nn::Linear>();
      x = linear != nullptr ? ops.linear(*linear, x) : ops.relu(x);
    }
    return x;
  }
  Ops& ops;
  nn::Sequential body;
};
TORCH_MODULE(Mlp);

// --- cnn: a small ResNet ---------------------------------------------------------------------
nn::Conv2dOptions conv3x3(std::int64_t in, std::int64_t out, std::int64_t stride) {
  return nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false);
}

struct BasicBlockImpl : nn::Module {
  BasicBlockImpl(Ops& ops, std::int64_t in, std::int64_t out, std::int64_t stride)
      : ops(ops), conv1(conv3x3(in, out, stride)), bn1(out), conv2(conv3x3(out, out, 1)), bn2(out) {
    register_module("conv1", conv1);
    register_module("bn1", bn1);
    register_module("conv2", conv2);
    register_module("bn2", bn2);
    if (stride != 1 || in != out) {
      shortcut->push_back(nn::Conv2d(nn::Conv2dOptions(in, out, 1).stride(stride).bias(false)));
      shortcut->push_back(nn::BatchNorm2d(out));
      register_module("shortcut", shortcut);
    }
  }
  torch::Tensor forward(torch::Tensor x) {
    auto y = ops.batch_norm_relu(*bn1, ops.conv2d(*conv1, x));
    y = ops.batch_norm(*bn2, ops.conv2d(*conv2, y));
    if (shortcut->is_empty()) return ops.relu(y + x);
    auto s = ops.conv2d(*shortcut[0]->as<nn::Conv2d>(), x);
    return ops.relu(y + ops.batch_norm(*shortcut[1]->as<nn::BatchNorm2d>(), s));
  }
  Ops& ops;
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Sequential shortcut;
};
TORCH_MODULE(BasicBlock);

struct ResNetImpl : nn::Module {
  ResNetImpl(Ops& ops, std::int64_t width, std::int64_t blocks, std::int64_t classes)
      : ops(ops), stem(conv3x3(3, width, 1)), stem_bn(width), head(2 * width, classes) {
    register_module("stem", stem);
    register_module("stem_bn", stem_bn);
    for (std::int64_t i = 0; i < blocks; ++i) stages->push_back(BasicBlock(ops, width, width, 1));
    stages->push_back(BasicBlock(ops, width, 2 * width, 2));
    for (std::int64_t i = 1; i < blocks; ++i)
      stages->push_back(BasicBlock(ops, 2 * width, 2 * width, 1));
    register_module("stages", stages);
    register_module("head", head);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = ops.batch_norm_relu(*stem_bn, ops.conv2d(*stem, x));
    x = stages->forward(x);
    return ops.linear(*head, ops.spatial_mean(x));
  }
  Ops& ops;
  nn::Conv2d stem;
  nn::BatchNorm2d stem_bn;
  nn::Sequential stages;
  nn::Linear head;
};
TORCH_MODULE(ResNet);

// --- conv3d: the 1 -> 4 -> 8 -> 1 network of seed 002 ----------------------------------------
struct Conv3dNetImpl : nn::Module {
  explicit Conv3dNetImpl(Ops& ops) : ops(ops) {
    for (auto [in, out] : {std::pair{1, 4}, {4, 8}, {8, 1}}) {
      body->push_back(nn::Conv3d(nn::Conv3dOptions(in, out, 3).padding(1)));
      body->push_back(nn::ReLU());
    }
    register_module("body", body);
  }
  torch::Tensor forward(torch::Tensor x) {
    for (const auto& layer : body->children()) {
      auto* conv = layer->as<nn::Conv3d>();
      x = conv != nullptr ? ops.conv3d(*conv, x) : ops.relu(x);
    }
    return x;
  }
  Ops& ops;
  nn::Sequential body;
};
TORCH_MODULE(Conv3dNet);

// --- activation checkpointing ------------------------------------------------------------------
// A block's forward kept as its input alone and run again in the backward pass, as
// torch.utils.checkpoint does with preserve_rng_state: the second run draws the same dropout
// masks (the portable stream's call numbers, or LibTorch's generator states) and runs the same
// kernels on the same inputs, so every gradient has the plain backward's bits. The block's
// parameters are not inputs of the node: the second run's own backward reaches them. The second run
// is not part of a step's trace (docs/dispute.md): it repeats calls the trace already holds, and
// a provider may checkpoint where its auditor does not.
template <typename Block>
struct Checkpointed : torch::autograd::Function<Checkpointed<Block>> {
  static torch::autograd::variable_list forward(torch::autograd::AutogradContext* ctx, Block* block,
                                                Ops* ops, const at::Tensor& x) {
    ctx->saved_data["block"] = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(block));
    ctx->saved_data["ops"] = static_cast<std::int64_t>(reinterpret_cast<std::intptr_t>(ops));
    ctx->saved_data["draws"] = static_cast<std::int64_t>(ops->draw_position());
    at::Generator gen = generator(x);
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      ctx->saved_data["rng"] = gen.get_state();
    }
    ctx->save_for_backward({x});
    return {block->forward(x)};
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext* ctx,
                                                 torch::autograd::variable_list grads) {
    auto* block =
        reinterpret_cast<Block*>(static_cast<std::intptr_t>(ctx->saved_data["block"].toInt()));
    auto* ops = reinterpret_cast<Ops*>(static_cast<std::intptr_t>(ctx->saved_data["ops"].toInt()));
    const at::Tensor x = ctx->get_saved_variables()[0].detach().requires_grad_(true);
    at::Generator gen = generator(x);
    at::Tensor rng_now;
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      rng_now = gen.get_state();
      gen.set_state(ctx->saved_data["rng"].toTensor());
    }
    const std::uint64_t draws_now = ops->draw_position();
    ops->set_draw_position(static_cast<std::uint64_t>(ctx->saved_data["draws"].toInt()));
    kernels::trace::Sink* sink = kernels::trace::install(nullptr);
    at::Tensor y;
    try {
      torch::AutoGradMode grad(true);
      y = block->forward(x);
    } catch (...) {
      kernels::trace::install(sink);
      throw;
    }
    kernels::trace::install(sink);
    ops->set_draw_position(draws_now);
    {
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(rng_now);
    }
    // Into the block's parameters through their own AccumulateGrad nodes, as the plain backward
    // stores them (a portable gradient as its operator computed it), and into x, whose gradient
    // is this node's.
    torch::autograd::backward({y}, {grads[0]});
    return {at::Tensor(), at::Tensor(), x.grad()};
  }

  // The generator a block's dropout draws from in LibTorch's arithmetic: the input's device's.
  static at::Generator generator(const at::Tensor& x) {
    if (x.is_cuda())
      return at::globalContext().defaultGenerator(at::Device(at::kCUDA, x.device().index()));
    return at::globalContext().defaultGenerator(at::kCPU);
  }
};

// --- gpt: decoder-only transformer -------------------------------------------------------------
struct GptBlockImpl : nn::Module {
  GptBlockImpl(Ops& ops, std::int64_t d, std::int64_t heads, std::int64_t ratio, double dropout)
      : ops(ops),
        ln1(nn::LayerNormOptions({d})),
        qkv(d, 3 * d),
        proj(d, d),
        ln2(nn::LayerNormOptions({d})),
        fc(d, ratio * d),
        out(ratio * d, d),
        drop(dropout),
        heads(heads) {
    register_module("ln1", ln1);
    register_module("qkv", qkv);
    register_module("proj", proj);
    register_module("ln2", ln2);
    register_module("fc", fc);
    register_module("out", out);
    register_module("drop", drop);
  }
  torch::Tensor forward(torch::Tensor x) {
    auto attn = ops.attention(ops.linear(*qkv, ops.layer_norm(*ln1, x)), heads, *drop);
    x = x + ops.dropout(*drop, ops.linear(*proj, attn));
    auto hidden = ops.gelu(ops.linear(*fc, ops.layer_norm(*ln2, x)));
    return x + ops.dropout(*drop, ops.linear(*out, hidden));
  }
  Ops& ops;
  nn::LayerNorm ln1;
  nn::Linear qkv, proj;
  nn::LayerNorm ln2;
  nn::Linear fc, out;
  nn::Dropout drop;
  std::int64_t heads;
};
TORCH_MODULE(GptBlock);

struct GptImpl : nn::Module {
  GptImpl(Ops& ops, const Options& o)
      : ops(ops),
        tok(o.at("vocab"), o.at("d_model")),
        pos(o.at("seq_len"), o.at("d_model")),
        ln_f(nn::LayerNormOptions({o.at("d_model")})),
        lm_head(o.at("d_model"), o.at("vocab")) {
    register_module("tok", tok);
    register_module("pos", pos);
    const double dropout = static_cast<double>(o.at("dropout_permille")) / 1000.0;
    for (std::int64_t i = 0; i < o.at("layers"); ++i) {
      blocks.push_back(register_module(
          "block" + std::to_string(i),
          GptBlock(ops, o.at("d_model"), o.at("heads"), o.at("mlp_ratio"), dropout)));
    }
    register_module("ln_f", ln_f);
    register_module("lm_head", lm_head);
  }
  torch::Tensor forward(torch::Tensor tokens) {
    auto x = ops.embed(*tok, *pos, tokens);
    const bool recompute = checkpoint && is_training() && at::GradMode::is_enabled();
    for (auto& block : blocks) {
      x = recompute ? Checkpointed<GptBlockImpl>::apply(block.get(), &ops, x)[0]
                    : block->forward(x);
    }
    return ops.linear(*lm_head, ops.layer_norm(*ln_f, x));
  }
  bool checkpoint = false;  // Network::checkpoint_activations
  Ops& ops;
  nn::Embedding tok, pos;
  std::vector<GptBlock> blocks;
  nn::LayerNorm ln_f;
  nn::Linear lm_head;
};
TORCH_MODULE(Gpt);

// --- adapters ----------------------------------------------------------------------------------
// Owns the arithmetic its module computes in; the module holds a reference to it.
template <typename Holder>
class ModuleNetwork final : public Network {
 public:
  template <typename... Args>
  explicit ModuleNetwork(std::unique_ptr<Ops> ops, Args&&... args)
      : ops_(std::move(ops)), module_(*ops_, std::forward<Args>(args)...) {}
  at::Tensor forward(const at::Tensor& input) override { return module_->forward(input); }
  at::Tensor loss(const LossSpec& loss, const at::Tensor& output,
                  const at::Tensor& target) override {
    return ops_->loss(loss, output, target);
  }
  void begin_forward(std::int64_t global_step, std::int64_t group) override {
    ops_->begin_forward(global_step, group);
  }
  bool portable() const override { return ops_->portable(); }
  void init_portable(std::uint64_t seed) override { portable_init(*module_, seed); }
  NamedTensors parameters() override { return named(module_->named_parameters()); }
  std::map<std::string, std::string> parameter_modules() override {
    std::map<std::string, std::string> out;
    for (const auto& m : module_->named_modules("", /*include_self=*/true)) {
      const std::string prefix = m.key().empty() ? "" : m.key() + ".";
      for (const auto& p : m.value()->named_parameters(/*recurse=*/false))
        out[prefix + p.key()] = module_kind(m.value()->name());
    }
    return out;
  }
  NamedTensors buffers() override { return named(module_->named_buffers()); }
  void to(const at::Device& device) override { module_->to(device); }
  void set_training(bool training) override { module_->train(training); }
  bool checkpoint_activations(bool on) override {
    if constexpr (requires { module_->checkpoint; }) {
      module_->checkpoint = on;
      return true;
    } else {
      return !on;
    }
  }

 private:
  static NamedTensors named(const torch::OrderedDict<std::string, torch::Tensor>& dict) {
    NamedTensors out;
    for (const auto& item : dict) out.emplace_back(item.key(), item.value());
    return out;
  }
  std::unique_ptr<Ops> ops_;
  Holder module_;
};

}  // namespace

Result<std::unique_ptr<Network>> make_zoo_network(const TrainingTask& resolved) {
  const Task& task = resolved.task;
  const Options& o = resolved.model;
  std::unique_ptr<Ops> ops =
      task.determinism == Determinism::kPortable ? portable_ops(task.seed) : torch_ops();
  switch (resolved.zoo_model().kind) {
    case ModelKind::kMlp:
      return std::unique_ptr<Network>(std::make_unique<ModuleNetwork<Mlp>>(
          std::move(ops), o.at("input_dim"), o.at("hidden"), o.at("layers"), o.at("classes")));
    case ModelKind::kCnn:
      return std::unique_ptr<Network>(std::make_unique<ModuleNetwork<ResNet>>(
          std::move(ops), o.at("width"), o.at("blocks"), o.at("classes")));
    case ModelKind::kConv3d:
      return std::unique_ptr<Network>(std::make_unique<ModuleNetwork<Conv3dNet>>(std::move(ops)));
    case ModelKind::kGpt:
      return std::unique_ptr<Network>(std::make_unique<ModuleNetwork<Gpt>>(std::move(ops), o));
    case ModelKind::kTorchScript:
      break;
  }
  return internal_error("model.name: \"" + task.model.name +
                        "\" is built by training/script/module.h, not the zoo");
}

}  // namespace vt::training
