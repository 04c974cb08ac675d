// TorchScript modules in portable arithmetic: the operators of their forward graph rewritten to
// veritrain's own (registered below as veritrain::*), every other operator checked to round
// nothing or one IEEE operation per element (docs/portable.md, "TorchScript modules").
#include "training/internal/script_portable.h"

#include <torch/csrc/jit/api/function_impl.h>
#include <torch/csrc/jit/ir/ir.h>
#include <torch/csrc/jit/passes/constant_propagation.h>
#include <torch/csrc/jit/passes/dead_code_elimination.h>
#include <torch/csrc/jit/passes/inliner.h>
#include <torch/library.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "training/internal/ops.h"
#include "training/internal/portable_fn.h"

namespace vt::training {
namespace {

thread_local Ops* t_script_ops = nullptr;

at::Tensor or_empty(const c10::optional<at::Tensor>& t) {
  return t.has_value() ? *t : at::Tensor();
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& b) {
  return portable::linear(x, w, or_empty(b));
}

at::Tensor conv(const at::Tensor& x, const at::Tensor& w, const c10::optional<at::Tensor>& b,
                at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                int64_t groups) {
  for (const int64_t d : dilation)
    TORCH_CHECK(d == 1, "portable conv: dilation ", dilation, " (portable kernels: dilation 1)");
  TORCH_CHECK(groups == 1, "portable conv: groups ", groups, " (portable kernels: groups 1)");
  return portable::conv(x, w, or_empty(b), stride, padding);
}

at::Tensor batch_norm(const at::Tensor& x, const c10::optional<at::Tensor>& w,
                      const c10::optional<at::Tensor>& b, const c10::optional<at::Tensor>& mean,
                      const c10::optional<at::Tensor>& var, bool training, double momentum,
                      double eps, bool /*cudnn_enabled*/) {
  TORCH_CHECK(mean.has_value() && var.has_value(),
              "portable batch_norm: running statistics are required (track_running_stats)");
  return portable::batch_norm(x, or_empty(w), or_empty(b), *mean, *var, training, momentum, eps);
}

at::Tensor layer_norm(const at::Tensor& x, at::IntArrayRef shape,
                      const c10::optional<at::Tensor>& w, const c10::optional<at::Tensor>& b,
                      double eps, bool /*cudnn_enable*/) {
  TORCH_CHECK(shape.size() == 1 && x.dim() >= 1 && shape[0] == x.size(-1),
              "portable layer_norm: over the last dimension only, got normalized_shape ", shape,
              " for input ", x.sizes());
  return portable::layer_norm(x, or_empty(w), or_empty(b), eps);
}

at::Tensor gelu(const at::Tensor& x, c10::string_view approximate) {
  TORCH_CHECK(approximate == "none", "portable gelu: approximate='", std::string(approximate),
              "' (portable kernels: the erf form, approximate='none')");
  return portable::gelu(x);
}

at::Tensor dropout(const at::Tensor& x, double p, bool train) {
  if (!train || p == 0.0) return x;
  TORCH_CHECK(t_script_ops != nullptr, "portable dropout: no training pass is running");
  return t_script_ops->dropout(x, p, train);
}

// The spatial mean, kept as [B, C, 1, 1] (adaptive_avg_pool2d(x, 1), mean(x, (2, 3), True)) or
// not.
at::Tensor spatial_mean(const at::Tensor& x, bool keepdim) {
  at::Tensor m = portable::spatial_mean(x);
  if (!keepdim) return m;
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  for (std::size_t d = 2; d < shape.size(); ++d) shape[d] = 1;
  return m.reshape(shape);
}

at::Tensor adaptive_avg_pool(const at::Tensor& x, at::IntArrayRef size) {
  for (const int64_t s : size)
    TORCH_CHECK(s == 1, "portable adaptive_avg_pool2d: output size ", size, " (portable: 1)");
  return spatial_mean(x, /*keepdim=*/true);
}

at::Tensor mean(const at::Tensor& x, at::OptionalIntArrayRef dims, bool keepdim,
                c10::optional<at::ScalarType> dtype) {
  TORCH_CHECK(!dtype.has_value(), "portable mean: no dtype argument");
  std::set<int64_t> wanted;
  if (dims.has_value()) {
    for (const int64_t d : *dims) wanted.insert(d < 0 ? d + x.dim() : d);
  }
  std::set<int64_t> spatial;
  for (int64_t d = 2; d < x.dim(); ++d) spatial.insert(d);
  std::string listed;
  for (const int64_t d : wanted) listed += (listed.empty() ? "" : ", ") + std::to_string(d);
  TORCH_CHECK(x.dim() > 2 && wanted == spatial,
              "portable mean: over the spatial dimensions "
              "(2 and after) of a [B, C, ...] input only, got dims (",
              listed, ") for ", x.sizes());
  return spatial_mean(x, keepdim);
}

at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& target,
                         const c10::optional<at::Tensor>& weight, int64_t reduction,
                         int64_t ignore_index, double label_smoothing) {
  TORCH_CHECK(!weight.has_value() && reduction == at::Reduction::Mean && label_smoothing == 0.0,
              "portable cross_entropy: class weights, label smoothing and reductions other "
              "than the mean have no portable kernel");
  TORCH_CHECK(logits.dim() == 2 && target.dim() == 1,
              "portable cross_entropy: [N, C] logits and [N] targets, got ", logits.sizes(),
              " and ", target.sizes());
  TORCH_CHECK(!(target == ignore_index).any().item<bool>(),
              "portable cross_entropy: a target equals ignore_index ", ignore_index);
  return portable::cross_entropy(logits, target);
}

at::Tensor mse_loss(const at::Tensor& output, const at::Tensor& target, int64_t reduction) {
  TORCH_CHECK(reduction == at::Reduction::Mean, "portable mse_loss: the mean reduction only");
  return portable::mse(output, target);
}

// The forward operators with a portable kernel, by the aten operator they replace. Each one has
// the aten operator's arguments, so a node keeps its inputs.
struct Rewrite {
  const char* aten;      // qualified name
  const char* overload;  // the aten overload it replaces ("" the unnamed one)
  const char* ours;      // veritrain::<name>
};
constexpr Rewrite kRewrites[] = {
    {"aten::linear", "", "veritrain::linear"},
    {"aten::conv2d", "", "veritrain::conv"},
    {"aten::conv3d", "", "veritrain::conv"},
    {"aten::batch_norm", "", "veritrain::batch_norm"},
    {"aten::layer_norm", "", "veritrain::layer_norm"},
    {"aten::relu", "", "veritrain::relu"},
    {"aten::relu_", "", "veritrain::relu"},  // only where its input has no other use
    {"aten::gelu", "", "veritrain::gelu"},
    {"aten::dropout", "", "veritrain::dropout"},
    {"aten::adaptive_avg_pool2d", "", "veritrain::adaptive_avg_pool"},
    {"aten::mean", "dim", "veritrain::mean"},
    {"aten::cross_entropy_loss", "", "veritrain::cross_entropy"},
    {"aten::mse_loss", "", "veritrain::mse_loss"},
};

// Operators on tensors that round nothing (views, copies, shapes) or one IEEE operation per
// element, the same on every CPU at every vector width: element-wise add, sub, mul, div (alpha
// 1, no rounding mode), dtype conversions (uint8 images to float). Their gradients are of the
// same kinds.
const std::set<std::string> kExact = {
    "aten::add",         "aten::add_",       "aten::sub",       "aten::sub_",
    "aten::mul",         "aten::mul_",       "aten::div",       "aten::div_",
    "aten::neg",         "aten::flatten",    "aten::view",      "aten::reshape",
    "aten::permute",     "aten::transpose",  "aten::t",         "aten::contiguous",
    "aten::unsqueeze",   "aten::squeeze",    "aten::slice",     "aten::select",
    "aten::cat",         "aten::stack",      "aten::clone",     "aten::detach",
    "aten::expand",      "aten::chunk",      "aten::split",     "aten::narrow",
    "aten::size",        "aten::dim",        "aten::numel",     "aten::len",
    "aten::__getitem__", "aten::zeros_like", "aten::ones_like", "aten::to"};

bool touches_tensors(const torch::jit::Node* n) {
  const auto tensor = [](const torch::jit::Value* v) {
    return v->type()->kind() == c10::TypeKind::TensorType;
  };
  return std::ranges::any_of(n->inputs(), tensor) || std::ranges::any_of(n->outputs(), tensor);
}

// What keeps an operator of kExact from being exact: an alpha other than 1 (a product rounded
// before the sum), a rounding mode.
std::string exact_caveat(const torch::jit::Node* n) {
  const c10::FunctionSchema* schema = n->maybeSchema();
  if (schema == nullptr) return "";
  if (schema->overload_name().find("mode") != std::string::npos) return "with a rounding mode";
  const auto alpha = schema->argumentIndexWithName("alpha");
  if (!alpha) return "";
  const auto value = torch::jit::toIValue(n->input(*alpha));
  if (!value || !value->isScalar() || value->toScalar().toDouble() != 1.0) return "with alpha ≠ 1";
  return "";
}

std::string overload_of(const torch::jit::Node* n) {
  const c10::FunctionSchema* schema = n->maybeSchema();
  return schema != nullptr ? schema->overload_name() : "";
}

// The node's name as a reader finds it in the module's code.
std::string describe(const torch::jit::Node* n) {
  const std::string overload = overload_of(n);
  return std::string(n->kind().toQualString()) + (overload.empty() ? "" : "." + overload);
}

// The nodes to rewrite, each with the operator it becomes, and the operators refused.
using Rewrites = std::vector<std::pair<torch::jit::Node*, const char*>>;
void collect(torch::jit::Block* block, Rewrites& rewrite,
             std::map<std::string, std::string>& refused) {
  for (torch::jit::Node* n : block->nodes()) {
    for (torch::jit::Block* inner : n->blocks()) collect(inner, rewrite, refused);
    const std::string kind = n->kind().toQualString();
    if (kind.rfind("prim::", 0) == 0 || !touches_tensors(n)) continue;
    const char* ours = nullptr;
    for (const Rewrite& r : kRewrites) {
      if (kind == r.aten && overload_of(n) == r.overload) ours = r.ours;
    }
    if (ours != nullptr && kind == "aten::relu_" && n->input(0)->uses().size() > 1) {
      refused.emplace(describe(n), "in place on a tensor used again");
    } else if (ours != nullptr) {
      rewrite.emplace_back(n, ours);
    } else if (kExact.count(kind) == 0) {
      refused.emplace(describe(n), "");
    } else if (const std::string caveat = exact_caveat(n); !caveat.empty()) {
      refused.emplace(describe(n), caveat);
    }
  }
}

}  // namespace

TORCH_LIBRARY(veritrain, m) {
  m.def("linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor");
  m.def(
      "conv(Tensor input, Tensor weight, Tensor? bias, int[] stride, int[] padding, "
      "int[] dilation, int groups) -> Tensor");
  m.def(
      "batch_norm(Tensor input, Tensor? weight, Tensor? bias, Tensor? running_mean, "
      "Tensor? running_var, bool training, float momentum, float eps, bool cudnn_enabled) -> "
      "Tensor");
  m.def(
      "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, Tensor? bias=None, "
      "float eps=1e-05, bool cudnn_enable=True) -> Tensor");
  m.def("relu(Tensor self) -> Tensor");
  m.def("gelu(Tensor self, str approximate='none') -> Tensor");
  m.def("dropout(Tensor input, float p, bool train) -> Tensor");
  m.def("adaptive_avg_pool(Tensor self, int[] output_size) -> Tensor");
  m.def("mean(Tensor self, int[]? dim, bool keepdim=False, ScalarType? dtype=None) -> Tensor");
  m.def(
      "cross_entropy(Tensor self, Tensor target, Tensor? weight=None, int reduction=1, "
      "int ignore_index=-100, float label_smoothing=0.0) -> Tensor");
  m.def("mse_loss(Tensor self, Tensor target, int reduction=1) -> Tensor");
}

// Composite: each one is a portable autograd function, recorded by autograd as itself.
TORCH_LIBRARY_IMPL(veritrain, CompositeImplicitAutograd, m) {
  m.impl("linear", &linear);
  m.impl("conv", &conv);
  m.impl("batch_norm", &batch_norm);
  m.impl("layer_norm", &layer_norm);
  m.impl("relu", [](const at::Tensor& x) { return portable::relu(x); });
  m.impl("gelu", &gelu);
  m.impl("dropout", &dropout);
  m.impl("adaptive_avg_pool", &adaptive_avg_pool);
  m.impl("mean", &mean);
  m.impl("cross_entropy", &cross_entropy);
  m.impl("mse_loss", &mse_loss);
}

void set_script_ops(Ops* ops) { t_script_ops = ops; }

Status make_portable(torch::jit::Module& module, const std::string& file) {
  std::shared_ptr<torch::jit::Graph> graph =
      torch::jit::toGraphFunction(module.get_method("forward").function()).graph();
  torch::jit::Inline(*graph);
  // Branches on constants (F.relu's `if inplace`) folded away, so that only the operators that
  // can run are judged. Tensors are never folded: that would be LibTorch's arithmetic.
  torch::jit::ConstantPropagationImmutableTypes(graph);
  torch::jit::EliminateDeadCode(graph);
  Rewrites rewrite;
  std::map<std::string, std::string> refused;
  collect(graph->block(), rewrite, refused);
  if (refused.empty()) {
    for (const auto& [n, ours] : rewrite) {
      torch::jit::Node* replacement =
          graph->create(c10::Symbol::fromQualString(ours), n->inputs(), n->outputs().size());
      replacement->insertBefore(n);
      replacement->output()->setType(n->output()->type());
      n->output()->replaceAllUsesWith(replacement->output());
      n->destroy();
    }
  }
  if (refused.empty()) return {};
  std::string names;
  for (const auto& [name, caveat] : refused)
    names += (names.empty() ? "" : ", ") + name + (caveat.empty() ? "" : " (" + caveat + ")");
  return invalid_input(
      file +
      ": determinism portable runs a TorchScript module's forward on veritrain's own "
      "kernels, and it has none for " +
      names +
      ". Portable kernels: linear, conv2d, conv3d (dilation 1, groups 1), batch_norm, "
      "layer_norm (last dimension), relu, gelu, dropout, adaptive_avg_pool2d(1), mean over the "
      "spatial dimensions, cross_entropy, mse_loss; and views, copies, conversions and "
      "element-wise add, sub, mul, div, which round alike everywhere (docs/portable.md, "
      "\"TorchScript modules\"). "
      "Train this module with determinism exact or tolerance, or write it with those.");
}

}  // namespace vt::training
