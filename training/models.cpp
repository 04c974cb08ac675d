// The model zoo (mlp, cnn, conv3d, gpt); user TorchScript modules are in torchscript_model.cpp.
#include <torch/torch.h>

#include <cmath>

#include "training/internal/network.h"

namespace vt::training {
namespace {
namespace nn = torch::nn;
namespace F = torch::nn::functional;

// --- mlp -------------------------------------------------------------------------------------
struct MlpImpl : nn::Module {
  MlpImpl(std::int64_t in, std::int64_t hidden, std::int64_t layers, std::int64_t classes) {
    std::int64_t width = in;
    for (std::int64_t i = 0; i < layers; ++i) {
      body->push_back(nn::Linear(width, hidden));
      body->push_back(nn::ReLU());
      width = hidden;
    }
    body->push_back(nn::Linear(width, classes));
    register_module("body", body);
  }
  torch::Tensor forward(torch::Tensor x) { return body->forward(x.flatten(1)); }
  nn::Sequential body;
};
TORCH_MODULE(Mlp);

// --- cnn: a small ResNet ---------------------------------------------------------------------
nn::Conv2dOptions conv3x3(std::int64_t in, std::int64_t out, std::int64_t stride) {
  return nn::Conv2dOptions(in, out, 3).stride(stride).padding(1).bias(false);
}

struct BasicBlockImpl : nn::Module {
  BasicBlockImpl(std::int64_t in, std::int64_t out, std::int64_t stride)
      : conv1(conv3x3(in, out, stride)), bn1(out), conv2(conv3x3(out, out, 1)), bn2(out) {
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
    auto y = torch::relu(bn1(conv1(x)));
    y = bn2(conv2(y));
    return torch::relu(y + (shortcut->is_empty() ? x : shortcut->forward(x)));
  }
  nn::Conv2d conv1;
  nn::BatchNorm2d bn1;
  nn::Conv2d conv2;
  nn::BatchNorm2d bn2;
  nn::Sequential shortcut;
};
TORCH_MODULE(BasicBlock);

struct ResNetImpl : nn::Module {
  ResNetImpl(std::int64_t width, std::int64_t blocks, std::int64_t classes)
      : stem(conv3x3(3, width, 1)), stem_bn(width), head(2 * width, classes) {
    register_module("stem", stem);
    register_module("stem_bn", stem_bn);
    for (std::int64_t i = 0; i < blocks; ++i) stages->push_back(BasicBlock(width, width, 1));
    stages->push_back(BasicBlock(width, 2 * width, 2));
    for (std::int64_t i = 1; i < blocks; ++i)
      stages->push_back(BasicBlock(2 * width, 2 * width, 1));
    register_module("stages", stages);
    register_module("head", head);
  }
  torch::Tensor forward(torch::Tensor x) {
    x = torch::relu(stem_bn(stem(x)));
    x = stages->forward(x);
    return head(x.mean({2, 3}));
  }
  nn::Conv2d stem;
  nn::BatchNorm2d stem_bn;
  nn::Sequential stages;
  nn::Linear head;
};
TORCH_MODULE(ResNet);

// --- conv3d: the 1 -> 4 -> 8 -> 1 network of seed 002 ----------------------------------------
struct Conv3dNetImpl : nn::Module {
  Conv3dNetImpl() {
    for (auto [in, out] : {std::pair{1, 4}, {4, 8}, {8, 1}}) {
      body->push_back(nn::Conv3d(nn::Conv3dOptions(in, out, 3).padding(1)));
      body->push_back(nn::ReLU());
    }
    register_module("body", body);
  }
  torch::Tensor forward(torch::Tensor x) { return body->forward(x); }
  nn::Sequential body;
};
TORCH_MODULE(Conv3dNet);

// --- gpt: decoder-only transformer -------------------------------------------------------------
struct GptBlockImpl : nn::Module {
  GptBlockImpl(std::int64_t d, std::int64_t heads, std::int64_t ratio, double dropout)
      : ln1(nn::LayerNormOptions({d})),
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
  torch::Tensor forward(torch::Tensor x, const torch::Tensor& causal_mask) {
    const auto b = x.size(0), t = x.size(1), d = x.size(2);
    auto parts = qkv(ln1(x)).view({b, t, 3, heads, d / heads}).permute({2, 0, 3, 1, 4});
    auto q = parts[0], k = parts[1], v = parts[2];
    auto scores = torch::matmul(q, k.transpose(-2, -1)) / std::sqrt(static_cast<double>(d / heads));
    scores = scores.masked_fill(causal_mask, -std::numeric_limits<float>::infinity());
    auto attn = torch::matmul(drop(torch::softmax(scores, -1)), v);
    x = x + drop(proj(attn.transpose(1, 2).reshape({b, t, d})));
    return x + drop(out(torch::gelu(fc(ln2(x)))));
  }
  nn::LayerNorm ln1;
  nn::Linear qkv, proj;
  nn::LayerNorm ln2;
  nn::Linear fc, out;
  nn::Dropout drop;
  std::int64_t heads;
};
TORCH_MODULE(GptBlock);

struct GptImpl : nn::Module {
  GptImpl(const Options& o)
      : tok(o.at("vocab"), o.at("d_model")),
        pos(o.at("seq_len"), o.at("d_model")),
        ln_f(nn::LayerNormOptions({o.at("d_model")})),
        lm_head(o.at("d_model"), o.at("vocab")) {
    register_module("tok", tok);
    register_module("pos", pos);
    const double dropout = static_cast<double>(o.at("dropout_permille")) / 1000.0;
    for (std::int64_t i = 0; i < o.at("layers"); ++i) {
      blocks.push_back(
          register_module("block" + std::to_string(i),
                          GptBlock(o.at("d_model"), o.at("heads"), o.at("mlp_ratio"), dropout)));
    }
    register_module("ln_f", ln_f);
    register_module("lm_head", lm_head);
  }
  torch::Tensor forward(torch::Tensor tokens) {
    const auto t = tokens.size(1);
    auto positions = torch::arange(t, tokens.options());
    auto x = tok(tokens) + pos(positions).unsqueeze(0);
    auto mask = torch::ones({t, t}, tokens.options().dtype(torch::kBool)).triu(1);
    for (auto& block : blocks) x = block->forward(x, mask);
    return lm_head(ln_f(x));
  }
  nn::Embedding tok, pos;
  std::vector<GptBlock> blocks;
  nn::LayerNorm ln_f;
  nn::Linear lm_head;
};
TORCH_MODULE(Gpt);

// --- adapters ----------------------------------------------------------------------------------
template <typename Holder>
class ModuleNetwork final : public Network {
 public:
  explicit ModuleNetwork(Holder module) : module_(std::move(module)) {}
  at::Tensor forward(const at::Tensor& input) override { return module_->forward(input); }
  NamedTensors parameters() override { return named(module_->named_parameters()); }
  NamedTensors buffers() override { return named(module_->named_buffers()); }
  void to(const at::Device& device) override { module_->to(device); }
  void set_training(bool training) override { module_->train(training); }

 private:
  static NamedTensors named(const torch::OrderedDict<std::string, torch::Tensor>& dict) {
    NamedTensors out;
    for (const auto& item : dict) out.emplace_back(item.key(), item.value());
    return out;
  }
  Holder module_;
};

}  // namespace

Result<std::unique_ptr<Network>> make_network(const Task& task, const Options& o,
                                              const std::filesystem::path& task_dir) {
  const std::string& name = task.model.name;
  if (name == "mlp") {
    return std::unique_ptr<Network>(std::make_unique<ModuleNetwork<Mlp>>(
        Mlp(o.at("input_dim"), o.at("hidden"), o.at("layers"), o.at("classes"))));
  }
  if (name == "cnn") {
    return std::unique_ptr<Network>(std::make_unique<ModuleNetwork<ResNet>>(
        ResNet(o.at("width"), o.at("blocks"), o.at("classes"))));
  }
  if (name == "conv3d")
    return std::unique_ptr<Network>(std::make_unique<ModuleNetwork<Conv3dNet>>(Conv3dNet()));
  if (name == "gpt") return std::unique_ptr<Network>(std::make_unique<ModuleNetwork<Gpt>>(Gpt(o)));
  if (name == "torchscript") return load_torchscript(task, task_dir);
  return invalid_input("model.name: unknown model \"" + name + "\"");
}

at::Tensor compute_loss(const std::string& loss, const at::Tensor& output,
                        const at::Tensor& target) {
  if (loss == "mse") return F::mse_loss(output, target);
  if (output.dim() == 3) {  // token models: (batch, time, vocab) against (batch, time)
    return F::cross_entropy(output.reshape({-1, output.size(-1)}), target.reshape({-1}));
  }
  return F::cross_entropy(output, target);
}

at::Tensor Network::forward_loss(const at::Tensor&, const at::Tensor&) {
  throw ModelError(
      "loss \"model\" needs a TorchScript module whose forward(inputs, targets) returns the loss");
}

Status Network::save_torchscript(const std::filesystem::path&) {
  return invalid_input(
      "--torchscript: export as TorchScript is for torchscript tasks only (a zoo model is not a "
      "TorchScript module); --safetensors exports any model");
}

at::Tensor step_loss(const std::string& loss, Network& net, const at::Tensor& input,
                     const at::Tensor& target) {
  if (loss == "model") return net.forward_loss(input, target);
  return compute_loss(loss, net.forward(input), target);
}

std::string describe_tensor(const at::Tensor& t) {
  std::string out = "[";
  for (std::int64_t d = 0; d < t.dim(); ++d) {
    if (d > 0) out += ", ";
    out += std::to_string(t.size(d));
  }
  return out + "] " + c10::toString(t.scalar_type());
}

Status check_model_fits(const std::string& loss, Network& net, const at::Tensor& x,
                        const at::Tensor& y, std::int64_t max_class) {
  try {
    if (loss == "model") {
      const at::Tensor l = net.forward_loss(x, y);
      if (l.dim() != 0 || !l.is_floating_point()) {
        return invalid_input("model: forward(inputs, targets) returned " + describe_tensor(l) +
                             "; loss \"model\" expects a floating-point scalar (the loss)");
      }
      return {};
    }
    const at::Tensor out = net.forward(x);
    const std::string got =
        "model: forward(inputs " + describe_tensor(x) + ") returned " + describe_tensor(out);
    if (loss == "mse") {
      if (out.sizes() == y.sizes()) return {};
      return invalid_input(got + "; loss mse expects the targets' shape " + describe_tensor(y));
    }
    std::string expected = "[";
    for (std::int64_t d = 0; d < y.dim(); ++d) {
      expected += std::to_string(y.size(d));
      expected += ", ";
    }
    expected += "C] logits";
    const bool fits = out.is_floating_point() && out.dim() == y.dim() + 1 &&
                      out.sizes().slice(0, y.dim()) == y.sizes();
    if (!fits) {
      return invalid_input(got + "; loss cross_entropy with targets " + describe_tensor(y) +
                           " expects " + expected);
    }
    if (max_class >= out.size(-1)) {
      return invalid_input(got + ": " + std::to_string(out.size(-1)) +
                           " classes, but the targets hold class " + std::to_string(max_class) +
                           "; expected " + expected + " with C > " + std::to_string(max_class));
    }
    return {};
  } catch (const ModelError& e) {
    return invalid_input(e.what());
  }
}

}  // namespace vt::training
