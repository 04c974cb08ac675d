// The interface every model is trained through, and what the trainer asks of any model:
// LibTorch's loss, the step's loss, the fit of a model's output to its targets, and how errors
// name tensors and quote a module.
#include "training/model/network.h"

#include <torch/torch.h>

#include <sstream>

namespace vt::training {
namespace F = torch::nn::functional;

at::Tensor compute_loss(const LossSpec& loss, const at::Tensor& output, const at::Tensor& target) {
  if (loss.name == "mse") return F::mse_loss(output, target);
  // F.cross_entropy(..., label_smoothing=eps): eps 0 is the unsmoothed loss's own path.
  const auto options = F::CrossEntropyFuncOptions().label_smoothing(loss.label_smoothing);
  if (output.dim() == 3 && target.dim() == 2) {  // token models: (batch, time, vocab)
    return F::cross_entropy(output.reshape({-1, output.size(-1)}), target.reshape({-1}), options);
  }
  // Per-position targets (batch, H, W) of (batch, classes, H, W) logits: PyTorch's own form.
  return F::cross_entropy(output, target, options);
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

at::Tensor step_loss(const LossSpec& loss, Network& net, const at::Tensor& input,
                     const at::Tensor& target) {
  if (loss.name == "model") return net.forward_loss(input, target);
  return net.loss(loss, net.forward(input), target);
}

std::string module_kind(const std::string& class_name) {
  std::string kind = class_name;
  for (const char* separator : {"::", "."}) {
    if (const auto at = kind.rfind(separator); at != std::string::npos)
      kind = kind.substr(at + std::string_view(separator).size());
  }
  if (kind.size() > 4 && kind.ends_with("Impl")) kind.resize(kind.size() - 4);
  return kind;
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
    // Class ids [B] or tokens [B, T] take the classes last; per-position targets [B, H, W]
    // (segmentation) take them second, as PyTorch's cross_entropy does.
    const std::int64_t class_dim = classes_dim(y);
    std::string expected = "[";
    for (std::int64_t d = 0; d < y.dim(); ++d) {
      if (d == 1 && class_dim == 1) expected += "C, ";
      expected += std::to_string(y.size(d));
      expected += d + 1 < y.dim() || class_dim != 1 ? ", " : "";
    }
    expected += class_dim == 1 ? "] logits" : "C] logits";
    bool fits = out.is_floating_point() && out.dim() == y.dim() + 1;
    if (fits && class_dim == 1) {
      fits = out.size(0) == y.size(0) && out.sizes().slice(2) == y.sizes().slice(1);
    } else if (fits) {
      fits = out.sizes().slice(0, y.dim()) == y.sizes();
    }
    if (!fits) {
      return invalid_input(got + "; loss cross_entropy with targets " + describe_tensor(y) +
                           " expects " + expected);
    }
    if (max_class >= out.size(class_dim)) {
      return invalid_input(got + ": " + std::to_string(out.size(class_dim)) +
                           " classes, but the targets hold class " + std::to_string(max_class) +
                           "; expected " + expected + " with C > " + std::to_string(max_class));
    }
    return {};
  } catch (const ModelError& e) {
    return invalid_input(e.what());
  }
}

// TorchScript wraps the module's own error in its interpreter traceback; the last
// "SomethingError: ..." line onwards is what the model said.
std::string model_message(const std::string& what) {
  std::vector<std::string> lines;
  std::istringstream in(what);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::size_t from = lines.size();
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    const auto colon = l.find(": ");
    const std::string head = l.substr(0, colon);
    if (colon != std::string::npos && head.find(' ') == std::string::npos &&
        (head.ends_with("Error") || head.ends_with("Exception"))) {
      from = i;
    }
  }
  if (from == lines.size()) {
    for (const std::string& l : lines) {
      if (!l.empty()) return l;
    }
    return what;
  }
  std::string out;
  for (std::size_t i = from; i < lines.size() && i < from + 3; ++i) {
    if (!out.empty()) out += ' ';
    out += lines[i];
  }
  return out;
}

}  // namespace vt::training
