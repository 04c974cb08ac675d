// The veritrain::* operators a portable TorchScript module's forward is rewritten onto
// (script/rewrite.cpp): each has the arguments of the aten operator it replaces, checks what the
// portable kernel covers (naming the argument it does not) and calls portable/functions.h /
// portable/operators.h. Registered once per process with torch::Library.
#include "training/portable/operators.h"

#include <torch/library.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <string>
#include <vector>

#include "training/portable/functions.h"
#include "training/portable/layers.h"
#include "training/script/op_table.h"

namespace vt::training {
namespace {

using at::IntArrayRef;
using at::Tensor;
using c10::optional;
namespace P = portable;

Tensor or_empty(const optional<Tensor>& t) { return t.has_value() ? *t : Tensor(); }
float f32(const at::Scalar& s) { return static_cast<float>(s.toDouble()); }

// --- what the first rewrite set already had --------------------------------------------------

Tensor linear(const Tensor& x, const Tensor& w, const optional<Tensor>& b) {
  return P::linear(x, w, or_empty(b));
}

Tensor conv(const Tensor& x, const Tensor& w, const optional<Tensor>& b, IntArrayRef stride,
            IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  const std::size_t spatial = static_cast<std::size_t>(std::max<int64_t>(w.dim() - 2, 1));
  auto full = [&](IntArrayRef v) {
    return v.size() == 1 && spatial > 1 ? std::vector<int64_t>(spatial, v[0]) : v.vec();
  };
  return P::conv(x, w, or_empty(b), full(stride), full(padding), full(dilation), groups);
}

Tensor batch_norm(const Tensor& x, const optional<Tensor>& w, const optional<Tensor>& b,
                  const optional<Tensor>& mean, const optional<Tensor>& var, bool training,
                  double momentum, double eps, bool /*cudnn_enabled*/) {
  TORCH_CHECK(mean.has_value() && var.has_value(),
              "portable batch_norm: running statistics are required (track_running_stats)");
  return P::batch_norm(x, or_empty(w), or_empty(b), *mean, *var, training, momentum, eps);
}

// Over the trailing dimensions normalized_shape names: rows of their product's width.
Tensor layer_norm(const Tensor& x, IntArrayRef shape, const optional<Tensor>& w,
                  const optional<Tensor>& b, double eps, bool /*cudnn_enable*/) {
  const int64_t n = static_cast<int64_t>(shape.size());
  TORCH_CHECK(
      n >= 1 && x.dim() >= n && x.sizes().slice(static_cast<std::size_t>(x.dim() - n)) == shape,
      "portable layer_norm: normalized_shape ", shape, " is not the end of ", x.sizes());
  if (n == 1) return P::layer_norm(x, or_empty(w), or_empty(b), eps);
  std::vector<int64_t> rows(x.sizes().begin(), x.sizes().end() - n);
  rows.push_back(-1);
  const Tensor flat_w = w.has_value() ? w->reshape({-1}) : Tensor();
  const Tensor flat_b = b.has_value() ? b->reshape({-1}) : Tensor();
  return P::layer_norm(x.reshape(rows), flat_w, flat_b, eps).view(x.sizes());
}

Tensor gelu(const Tensor& x, c10::string_view approximate) {
  if (approximate == "tanh") return P::activation(x, kernels::Activation::kGeluTanh, {});
  TORCH_CHECK(approximate == "none", "portable gelu: approximate='", std::string(approximate),
              "' (portable kernels: 'none', the erf form, and 'tanh')");
  return P::gelu(x);
}

Tensor adaptive_avg_pool(const Tensor& x, IntArrayRef size) {
  // Output 1 × 1 is the spatial mean of docs/portable.md's "Operators", bits unchanged.
  if (std::all_of(size.begin(), size.end(), [](int64_t s) { return s == 1; }) && x.dim() == 4) {
    return P::spatial_mean(x).view({x.size(0), x.size(1), 1, 1});
  }
  return P::adaptive_avg_pool2d(x, size);
}

// To 1 × 1 × 1 (rewrite.cpp refuses any other size): the spatial mean over (d, h, w).
Tensor adaptive_avg_pool3d(const Tensor& x, IntArrayRef size) {
  TORCH_CHECK(x.dim() == 5 && size.size() == 3 &&
                  std::all_of(size.begin(), size.end(), [](int64_t s) { return s == 1; }),
              "portable adaptive_avg_pool3d: [B, C, D, H, W] to 1 × 1 × 1 only, got ", x.sizes(),
              " to ", size);
  return P::spatial_mean(x).view({x.size(0), x.size(1), 1, 1, 1});
}

// F.interpolate's bilinear mode as TorchScript calls it (the .vec overload).
Tensor upsample_bilinear2d(const Tensor& x, at::OptionalIntArrayRef output_size, bool align_corners,
                           optional<at::ArrayRef<double>> scale_factors) {
  std::vector<int64_t> size;
  if (output_size.has_value()) size = output_size->vec();
  std::vector<double> scales;
  if (scale_factors.has_value()) scales = scale_factors->vec();
  return P::upsample_bilinear2d(x, size, align_corners, scales);
}

// F.interpolate's nearest mode, any of its 1-d, 2-d and 3-d operators (the .vec overloads).
Tensor upsample_nearest(const Tensor& x, at::OptionalIntArrayRef output_size,
                        optional<at::ArrayRef<double>> scale_factors) {
  std::vector<int64_t> size;
  if (output_size.has_value()) size = output_size->vec();
  std::vector<double> scales;
  if (scale_factors.has_value()) scales = scale_factors->vec();
  return P::upsample_nearest(x, size, scales);
}

std::vector<int64_t> dims_of(const Tensor& x, at::OptionalIntArrayRef dims) {
  std::vector<int64_t> out;
  if (dims.has_value()) {
    for (const int64_t d : *dims) out.push_back(d);
  }
  (void)x;
  return out;
}

Tensor reduced(const Tensor& x, at::OptionalIntArrayRef dims, bool keepdim,
               optional<at::ScalarType> dtype, kernels::Reduction r, const char* op) {
  TORCH_CHECK(!dtype.has_value() || *dtype == at::kFloat, "portable ", op,
              ": a dtype other than float32");
  // The spatial mean of a [B, C, ...] input keeps the bits of "Operators" (it is that mean).
  if (r == kernels::Reduction::kMean && x.dim() > 2 && dims.has_value()) {
    std::set<int64_t> want, spatial;
    for (const int64_t d : *dims) want.insert(d < 0 ? d + x.dim() : d);
    for (int64_t d = 2; d < x.dim(); ++d) spatial.insert(d);
    if (want == spatial) {
      Tensor m = P::spatial_mean(x);
      if (!keepdim) return m;
      std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
      for (std::size_t d = 2; d < shape.size(); ++d) shape[d] = 1;
      return m.reshape(shape);
    }
  }
  return P::reduce(x, dims_of(x, dims), keepdim, r);
}

Tensor mean_dim(const Tensor& x, at::OptionalIntArrayRef dims, bool keepdim,
                optional<at::ScalarType> dtype) {
  return reduced(x, dims, keepdim, dtype, kernels::Reduction::kMean, "mean");
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target, const optional<Tensor>& weight,
                     int64_t reduction, int64_t ignore_index, double label_smoothing) {
  TORCH_CHECK(!weight.has_value() && reduction == at::Reduction::Mean,
              "portable cross_entropy: class weights and reductions other than the mean have no "
              "portable kernel");
  TORCH_CHECK(logits.dim() == 2 && target.dim() == 1,
              "portable cross_entropy: [N, C] logits and [N] targets, got ", logits.sizes(),
              " and ", target.sizes());
  TORCH_CHECK(!(target == ignore_index).any().item<bool>(),
              "portable cross_entropy: a target equals ignore_index ", ignore_index);
  if (label_smoothing > 0.0) return P::cross_entropy_smoothed(logits, target, label_smoothing);
  return P::cross_entropy(logits, target);
}

Tensor mse_loss(const Tensor& output, const Tensor& target, int64_t reduction) {
  TORCH_CHECK(reduction == at::Reduction::Mean, "portable mse_loss: the mean reduction only");
  return P::mse(output, target);
}

// --- activations ----------------------------------------------------------------------------

Tensor act(const Tensor& x, kernels::Activation f, kernels::ActivationParams p = {}) {
  return P::activation(x, f, p);
}
// The functions whose one parameter rides in alpha: celu's alpha, the shrinks' lambda.
Tensor act_alpha(const Tensor& x, kernels::Activation f, const at::Scalar& alpha) {
  kernels::ActivationParams p;
  p.alpha = f32(alpha);
  return act(x, f, p);
}
Tensor hardtanh_op(const Tensor& x, const at::Scalar& lo, const at::Scalar& hi) {
  kernels::ActivationParams p;
  p.min_val = f32(lo);
  p.max_val = f32(hi);
  return act(x, kernels::Activation::kHardtanh, p);
}
Tensor leaky_relu(const Tensor& x, const at::Scalar& slope) {
  kernels::ActivationParams p;
  p.slope = f32(slope);
  return act(x, kernels::Activation::kLeakyRelu, p);
}
Tensor elu(const Tensor& x, const at::Scalar& alpha, const at::Scalar& scale,
           const at::Scalar& input_scale) {
  TORCH_CHECK(scale.toDouble() == 1.0 && input_scale.toDouble() == 1.0,
              "portable elu: scale and input_scale 1 only (torch.selu and torch.celu have kernels "
              "of their own)");
  kernels::ActivationParams p;
  p.alpha = f32(alpha);
  return act(x, kernels::Activation::kElu, p);
}
Tensor selu(const Tensor& x) { return act(x, kernels::Activation::kSelu, {}); }
Tensor mish(const Tensor& x) { return act(x, kernels::Activation::kMish, {}); }
Tensor log_sigmoid(const Tensor& x) { return act(x, kernels::Activation::kLogSigmoid, {}); }
Tensor celu(const Tensor& x, const at::Scalar& alpha) {
  return act_alpha(x, kernels::Activation::kCelu, alpha);
}
Tensor hardshrink(const Tensor& x, const at::Scalar& lambd) {
  return act_alpha(x, kernels::Activation::kHardshrink, lambd);
}
Tensor softshrink(const Tensor& x, const at::Scalar& lambd) {
  return act_alpha(x, kernels::Activation::kSoftshrink, lambd);
}
Tensor threshold_op(const Tensor& x, const at::Scalar& threshold, const at::Scalar& value) {
  kernels::ActivationParams p;
  p.threshold = f32(threshold);
  p.alpha = f32(value);
  return act(x, kernels::Activation::kThreshold, p);
}
Tensor softplus(const Tensor& x, const at::Scalar& beta, const at::Scalar& threshold) {
  kernels::ActivationParams p;
  p.beta = f32(beta);
  p.threshold = f32(threshold);
  return act(x, kernels::Activation::kSoftplus, p);
}

// --- pooling --------------------------------------------------------------------------------

Tensor max_pool2d(const Tensor& x, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation, bool ceil_mode) {
  return P::max_pool2d(x, kernel, stride, padding, dilation, ceil_mode);
}
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntArrayRef kernel,
                                                   IntArrayRef stride, IntArrayRef padding,
                                                   IntArrayRef dilation, bool ceil_mode) {
  Tensor indices;
  Tensor y = P::max_pool2d(x, kernel, stride, padding, dilation, ceil_mode, &indices);
  return {y, indices};
}
Tensor avg_pool2d(const Tensor& x, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                  bool ceil_mode, bool count_include_pad, optional<int64_t> divisor_override) {
  return P::avg_pool2d(
      x, kernel, stride, padding, ceil_mode, count_include_pad,
      divisor_override.has_value() ? std::optional<std::int64_t>(*divisor_override) : std::nullopt);
}

// --- convolution and products ---------------------------------------------------------------

Tensor conv_transpose(const Tensor& x, const Tensor& w, const optional<Tensor>& b,
                      IntArrayRef stride, IntArrayRef padding, IntArrayRef output_padding,
                      int64_t groups, IntArrayRef dilation) {
  const std::size_t spatial = static_cast<std::size_t>(std::max<int64_t>(w.dim() - 2, 1));
  auto full = [&](IntArrayRef v) {
    return v.size() == 1 && spatial > 1 ? std::vector<int64_t>(spatial, v[0]) : v.vec();
  };
  return P::conv_transpose(x, w, or_empty(b), full(stride), full(padding), full(output_padding),
                           full(dilation), groups);
}

Tensor bmm(const Tensor& a, const Tensor& b) { return P::baddbmm(Tensor(), a, b, 1.0, 1.0); }
Tensor mm(const Tensor& a, const Tensor& b) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "portable mm: ", a.sizes(), " · ", b.sizes());
  return P::baddbmm(Tensor(), a.unsqueeze(0), b.unsqueeze(0), 1.0, 1.0).squeeze(0);
}
Tensor baddbmm(const Tensor& c, const Tensor& a, const Tensor& b, const at::Scalar& beta,
               const at::Scalar& alpha) {
  const Tensor addend = P::broadcast_to(c, {a.size(0), a.size(1), b.size(2)});
  return P::baddbmm(addend, a, b, beta.toDouble(), alpha.toDouble());
}
Tensor addmm(const Tensor& c, const Tensor& a, const Tensor& b, const at::Scalar& beta,
             const at::Scalar& alpha) {
  TORCH_CHECK(a.dim() == 2 && b.dim() == 2, "portable addmm: ", a.sizes(), " · ", b.sizes());
  const Tensor addend = P::broadcast_to(c, {a.size(0), b.size(1)}).unsqueeze(0);
  return P::baddbmm(addend, a.unsqueeze(0), b.unsqueeze(0), beta.toDouble(), alpha.toDouble())
      .squeeze(0);
}

// --- element-wise operators that broadcast: the operands expanded portably first ------------

std::vector<int64_t> common_shape(const Tensor& a, const Tensor& b) {
  return at::infer_size(a.sizes(), b.sizes());
}
Tensor bcast(const Tensor& t, IntArrayRef shape) { return P::broadcast_to(t, shape); }

void check_alpha(const at::Scalar& alpha, const char* op) {
  TORCH_CHECK(alpha.toDouble() == 1.0, "portable ", op,
              ": alpha other than 1 (LibTorch fuses the product into the sum on some CPUs)");
}
Tensor add(const Tensor& a, const Tensor& b, const at::Scalar& alpha) {
  check_alpha(alpha, "add");
  const auto shape = common_shape(a, b);
  return at::add(bcast(a, shape), bcast(b, shape));
}
Tensor sub(const Tensor& a, const Tensor& b, const at::Scalar& alpha) {
  check_alpha(alpha, "sub");
  const auto shape = common_shape(a, b);
  return at::sub(bcast(a, shape), bcast(b, shape));
}
Tensor mul(const Tensor& a, const Tensor& b) {
  const auto shape = common_shape(a, b);
  return at::mul(bcast(a, shape), bcast(b, shape));
}
Tensor div(const Tensor& a, const Tensor& b) {
  const auto shape = common_shape(a, b);
  return at::div(bcast(a, shape), bcast(b, shape));
}
// A composition (docs/portable.md, "More functions"): the halves are views, the sigmoid is the
// portable kernel and the product one rounding each; the backward is theirs.
Tensor glu(const Tensor& x, int64_t dim) {
  TORCH_CHECK(x.dim() > 0, "portable glu: a tensor of at least one dimension");
  const int64_t d = at::maybe_wrap_dim(dim, x.dim());
  TORCH_CHECK(x.size(d) % 2 == 0, "portable glu: dimension ", dim, " has odd size ", x.size(d));
  const auto halves = x.chunk(2, d);
  return at::mul(halves[0], act(halves[1], kernels::Activation::kSigmoid));
}
// Division with a rounding mode (docs/portable.md): integers divide exactly, as LibTorch divides
// them; floats as floor(a ⊘ b) or trunc(a ⊘ b), one rounded division and an exact rounding to
// an integer, whose gradient is +0.
Tensor rounded(const Tensor& quotient, c10::string_view mode) {
  if (mode == "floor") return at::floor(quotient);
  TORCH_CHECK(mode == "trunc", "portable div: rounding_mode '", std::string(mode),
              "' (\"floor\" or \"trunc\")");
  return at::trunc(quotient);
}
Tensor div_mode(const Tensor& a, const Tensor& b, optional<c10::string_view> mode) {
  const auto shape = common_shape(a, b);
  const Tensor x = bcast(a, shape), y = bcast(b, shape);
  if (!mode.has_value()) return at::div(x, y);
  if (!at::isFloatingType(x.scalar_type()) && !at::isFloatingType(y.scalar_type()))
    return at::div(x, y, mode);
  return rounded(at::div(x, y), *mode);
}
Tensor div_scalar_mode(const Tensor& a, const at::Scalar& b, optional<c10::string_view> mode) {
  if (!mode.has_value()) return at::div(a, b);
  if (!at::isFloatingType(a.scalar_type()) && !b.isFloatingPoint()) return at::div(a, b, mode);
  return rounded(at::div(a, b), *mode);
}
// In place: self keeps its shape; only `other` may broadcast.
Tensor add_(Tensor& a, const Tensor& b, const at::Scalar& alpha) {
  check_alpha(alpha, "add_");
  return a.add_(bcast(b, a.sizes()));
}
Tensor sub_(Tensor& a, const Tensor& b, const at::Scalar& alpha) {
  check_alpha(alpha, "sub_");
  return a.sub_(bcast(b, a.sizes()));
}
Tensor mul_(Tensor& a, const Tensor& b) { return a.mul_(bcast(b, a.sizes())); }
Tensor div_(Tensor& a, const Tensor& b) { return a.div_(bcast(b, a.sizes())); }
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  const auto shape = at::infer_size(cond.sizes(), common_shape(a, b));
  return at::where(cond, bcast(a, shape), bcast(b, shape));
}
// A composition (docs/portable.md, "More functions"): a selection and one product each; the
// weight's gradient is the portable broadcast's fixed-order sum over what shares a channel.
Tensor prelu(const Tensor& x, const Tensor& weight) {
  TORCH_CHECK(weight.dim() <= 1, "portable prelu: a weight of one dimension, got ", weight.sizes());
  const int64_t channels = x.dim() >= 2 ? x.size(1) : 1;
  TORCH_CHECK(weight.numel() == 1 || weight.numel() == channels, "portable prelu: ", weight.numel(),
              " weights for an input of ", channels, " channels");
  std::vector<int64_t> shape(static_cast<std::size_t>(x.dim()), 1);
  if (weight.numel() > 1) shape[1] = channels;
  // Qualified: at::where and at::mul are found by argument-dependent lookup too.
  return training::where(x > 0, x, training::mul(x, weight.reshape(shape)));
}
Tensor maximum(const Tensor& a, const Tensor& b) {
  const auto shape = common_shape(a, b);
  return at::maximum(bcast(a, shape), bcast(b, shape));
}
Tensor minimum(const Tensor& a, const Tensor& b) {
  const auto shape = common_shape(a, b);
  return at::minimum(bcast(a, shape), bcast(b, shape));
}
Tensor expand(const Tensor& x, IntArrayRef size, bool /*implicit*/) {
  // -1 keeps a dimension's size.
  std::vector<int64_t> shape(size.begin(), size.end());
  const int64_t lead = static_cast<int64_t>(shape.size()) - x.dim();
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == -1) shape[d] = x.size(static_cast<int64_t>(d) - lead);
  }
  return bcast(x, shape);
}
// repeat: x tiled; as a broadcast of x with a new axis before each dimension, so its gradient is
// the chain over the tiles in order.
Tensor repeat(const Tensor& x, IntArrayRef repeats) {
  TORCH_CHECK(static_cast<int64_t>(repeats.size()) >= x.dim(), "portable repeat: ", repeats,
              " for ", x.sizes());
  const int64_t lead = static_cast<int64_t>(repeats.size()) - x.dim();
  std::vector<int64_t> split, tiled, out;
  for (std::size_t d = 0; d < repeats.size(); ++d) {
    const int64_t size =
        static_cast<int64_t>(d) < lead ? 1 : x.size(static_cast<int64_t>(d) - lead);
    split.insert(split.end(), {1, size});
    tiled.insert(tiled.end(), {repeats[d], size});
    out.push_back(repeats[d] * size);
  }
  return bcast(x.reshape(split), tiled).view(out);
}

// --- normalisation, losses --------------------------------------------------------------------

Tensor group_norm(const Tensor& x, int64_t groups, const optional<Tensor>& w,
                  const optional<Tensor>& b, double eps, bool /*cudnn_enabled*/) {
  return P::group_norm(x, groups, or_empty(w), or_empty(b), eps);
}

Tensor embedding(const Tensor& table, const Tensor& ids, int64_t padding_idx,
                 bool scale_grad_by_freq, bool sparse) {
  TORCH_CHECK(!scale_grad_by_freq && !sparse,
              "portable embedding: scale_grad_by_freq and sparse have no portable kernel");
  Tensor rows = P::embedding(ids, table);
  if (padding_idx < 0) return rows;
  // The positions of padding_idx keep their rows' values but pass no gradient back: padding_idx's
  // row gets none, as PyTorch's padding_idx says.
  return at::where((ids == padding_idx).unsqueeze(-1), rows.detach(), rows);
}

Tensor nll_loss(const Tensor& logp, const Tensor& target, const optional<Tensor>& weight,
                int64_t reduction, int64_t ignore_index) {
  TORCH_CHECK(!weight.has_value() && reduction == at::Reduction::Mean,
              "portable nll_loss: class weights and reductions other than the mean have no "
              "portable kernel");
  return P::nll_loss(logp, target, ignore_index);
}

Tensor bce_with_logits(const Tensor& x, const Tensor& target, const optional<Tensor>& weight,
                       const optional<Tensor>& pos_weight, int64_t reduction) {
  TORCH_CHECK(!weight.has_value() && !pos_weight.has_value() && reduction == at::Reduction::Mean,
              "portable binary_cross_entropy_with_logits: weights and reductions other than the "
              "mean have no portable kernel");
  return P::bce_with_logits(x, target);
}

}  // namespace

// Every schema of the operator table (script/op_table.h), defined once.
TORCH_LIBRARY(veritrain, m) {
  for (const PortableOp& op : portable_ops()) {
    if (!op.schema.empty()) m.def(torch::schema(std::string(op.schema).c_str()));
  }
}

// Composite: each one is portable autograd functions, recorded by autograd as themselves.
TORCH_LIBRARY_IMPL(veritrain, CompositeImplicitAutograd, m) {
  using A = kernels::Activation;
  m.impl("linear", &linear);
  m.impl("conv", &conv);
  m.impl("conv_transpose", &conv_transpose);
  m.impl("batch_norm", &batch_norm);
  m.impl("layer_norm", &layer_norm);
  m.impl("group_norm", &group_norm);
  m.impl("relu", [](const Tensor& x) { return P::relu(x); });
  m.impl("gelu", &gelu);
  m.impl("sigmoid", [](const Tensor& x) { return act(x, A::kSigmoid); });
  m.impl("tanh", [](const Tensor& x) { return act(x, A::kTanh); });
  m.impl("silu", [](const Tensor& x) { return act(x, A::kSilu); });
  m.impl("hardsigmoid", [](const Tensor& x) { return act(x, A::kHardsigmoid); });
  m.impl("hardswish", [](const Tensor& x) { return act(x, A::kHardswish); });
  m.impl("relu6", [](const Tensor& x) { return hardtanh_op(x, 0.0, 6.0); });
  m.impl("hardtanh", &hardtanh_op);
  m.impl("leaky_relu", &leaky_relu);
  m.impl("elu", &elu);
  m.impl("softplus", &softplus);
  m.impl("selu", &selu);
  m.impl("celu", &celu);
  m.impl("mish", &mish);
  m.impl("log_sigmoid", &log_sigmoid);
  m.impl("hardshrink", &hardshrink);
  m.impl("softshrink", &softshrink);
  m.impl("threshold", &threshold_op);
  m.impl("exp", [](const Tensor& x) { return act(x, A::kExp); });
  m.impl("log", [](const Tensor& x) { return act(x, A::kLog); });
  m.impl("glu", &glu);
  m.impl("prelu", &prelu);
  m.impl("max_pool2d", &max_pool2d);
  m.impl("max_pool2d_with_indices", &max_pool2d_with_indices);
  m.impl("avg_pool2d", &avg_pool2d);
  m.impl("adaptive_avg_pool", &adaptive_avg_pool);
  m.impl("adaptive_max_pool",
         [](const Tensor& x, IntArrayRef size) { return P::adaptive_max_pool2d(x, size); });
  m.impl("adaptive_avg_pool3d", &adaptive_avg_pool3d);
  m.impl("upsample_bilinear2d", &upsample_bilinear2d);
  m.impl("upsample_nearest", &upsample_nearest);
  m.impl("mean", &mean_dim);
  m.impl("mean_all", [](const Tensor& x, optional<at::ScalarType> dtype) {
    return reduced(x, c10::nullopt, false, dtype, kernels::Reduction::kMean, "mean");
  });
  m.impl("sum", [](const Tensor& x, at::OptionalIntArrayRef dims, bool keepdim,
                   optional<at::ScalarType> dtype) {
    return reduced(x, dims, keepdim, dtype, kernels::Reduction::kSum, "sum");
  });
  m.impl("sum_all", [](const Tensor& x, optional<at::ScalarType> dtype) {
    return reduced(x, c10::nullopt, false, dtype, kernels::Reduction::kSum, "sum");
  });
  m.impl("amax", [](const Tensor& x, IntArrayRef dims, bool keepdim) {
    return P::reduce(x, dims.vec(), keepdim, kernels::Reduction::kAmax);
  });
  m.impl("logsumexp", [](const Tensor& x, IntArrayRef dims, bool keepdim) {
    return P::reduce(x, dims.vec(), keepdim, kernels::Reduction::kLogsumexp);
  });
  m.impl("softmax", [](const Tensor& x, int64_t dim, optional<at::ScalarType> dtype) {
    TORCH_CHECK(!dtype.has_value() || *dtype == at::kFloat, "portable softmax: dtype");
    return P::softmax(x, dim);
  });
  m.impl("log_softmax", [](const Tensor& x, int64_t dim, optional<at::ScalarType> dtype) {
    TORCH_CHECK(!dtype.has_value() || *dtype == at::kFloat, "portable log_softmax: dtype");
    return P::log_softmax(x, dim);
  });
  m.impl("matmul", [](const Tensor& a, const Tensor& b) { return P::matmul(a, b); });
  m.impl("bmm", &bmm);
  m.impl("mm", &mm);
  m.impl("addmm", &addmm);
  m.impl("baddbmm", &baddbmm);
  m.impl("add", &add);
  m.impl("sub", &sub);
  m.impl("mul", &mul);
  m.impl("div", &div);
  m.impl("add_", &add_);
  m.impl("sub_", &sub_);
  m.impl("mul_", &mul_);
  m.impl("div_", &div_);
  m.impl("div_mode", &div_mode);
  m.impl("div_scalar_mode", &div_scalar_mode);
  m.impl("where", &where);
  m.impl("maximum", &maximum);
  m.impl("minimum", &minimum);
  m.impl("expand", &expand);
  m.impl("repeat", &repeat);
  m.impl("embedding", &embedding);
  m.impl("cross_entropy", &cross_entropy);
  m.impl("nll_loss", &nll_loss);
  m.impl("bce_with_logits", &bce_with_logits);
  m.impl("mse_loss", &mse_loss);
}

}  // namespace vt::training
