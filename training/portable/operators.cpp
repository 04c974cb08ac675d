// Differentiable LibTorch functions over the portable kernels of real models' element-wise,
// pooling, product and reduction operators (portable/operators.h; the layers are in
// portable/layers.cpp). Every floating-point operation happens in kernels/; here are only
// shapes, contiguous copies (exact) and which kernel runs.
#include "training/portable/operators.h"

#include <torch/torch.h>

#include <algorithm>

#include "kernels/conv.h"
#include "kernels/pointwise.h"
#include "kernels/pool.h"
#include "kernels/products.h"
#include "kernels/softmax.h"
#include "kernels/upsample.h"
#include "training/portable/functions.h"
#include "training/portable/tensor.h"

namespace vt::training::portable {

// portable/functions.cpp's.
kernels::ConvShape conv_shape(const at::Tensor& x, const at::Tensor& w,
                              const std::vector<std::int64_t>& stride,
                              const std::vector<std::int64_t>& padding,
                              const std::vector<std::int64_t>& dilation, std::int64_t groups);

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

std::int64_t code_of(kernels::Activation f) { return static_cast<std::int64_t>(f); }

struct ActivationFn : torch::autograd::Function<ActivationFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, std::int64_t code,
                            std::vector<double> params) {
    const at::Tensor x = operand(x_in, "activation");
    const auto f = static_cast<kernels::Activation>(code);
    const kernels::ActivationParams p{static_cast<float>(params[0]), static_cast<float>(params[1]),
                                      static_cast<float>(params[2]), static_cast<float>(params[3]),
                                      static_cast<float>(params[4]), static_cast<float>(params[5])};
    at::Tensor y = at::empty_like(x);
    kernels::activation(f, p, x.numel(), ptr(x), ptr(y));
    ctx->save_for_backward({kernels::backward_reads_output(f) ? y : x});
    ctx->saved_data["code"] = code;
    ctx->saved_data["params"] = params;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor saved = ctx->get_saved_variables()[0];
    const auto f = static_cast<kernels::Activation>(ctx->saved_data["code"].toInt());
    const auto params = ctx->saved_data["params"].toDoubleVector();
    const kernels::ActivationParams p{static_cast<float>(params[0]), static_cast<float>(params[1]),
                                      static_cast<float>(params[2]), static_cast<float>(params[3]),
                                      static_cast<float>(params[4]), static_cast<float>(params[5])};
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty_like(saved);
    const bool output = kernels::backward_reads_output(f);
    kernels::activation_backward(f, p, saved.numel(), output ? nullptr : ptr(saved),
                                 output ? ptr(saved) : nullptr, ptr(dy), ptr(dx));
    return {dx, at::Tensor(), at::Tensor()};
  }
};

// --- pooling -----------------------------------------------------------------------------------

enum class Pool : std::int64_t { kMax, kAvg, kAdaptiveAvg, kAdaptiveMax };

// The pool of x [B, C, H, W]; options: kernel, stride, padding, dilation (2 each), ceil_mode,
// count_include_pad, divisor_override (0: none) for fixed windows; the output size for adaptive.
struct PoolFn : torch::autograd::Function<PoolFn> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x_in, std::int64_t kind,
                               const std::vector<std::int64_t>& o) {
    const at::Tensor x = operand(x_in, "pool");
    TORCH_CHECK(x.dim() == 4, "portable pooling: [B, C, H, W] input, got ", x.sizes());
    kernels::PoolShape s = shape_of(x, static_cast<Pool>(kind), o);
    at::Tensor y = at::empty({x.size(0), x.size(1), s.out_h, s.out_w}, x.options());
    at::Tensor argmax = at::empty(y.sizes(), x.options().dtype(at::kLong));
    switch (static_cast<Pool>(kind)) {
      case Pool::kMax:
        kernels::max_pool2d(s, ptr(x), ptr(y), argmax.data_ptr<std::int64_t>());
        break;
      case Pool::kAdaptiveMax:
        kernels::adaptive_max_pool2d(s, ptr(x), ptr(y), argmax.data_ptr<std::int64_t>());
        break;
      case Pool::kAvg:
        kernels::avg_pool2d(s, avg_options(o), ptr(x), ptr(y));
        break;
      case Pool::kAdaptiveAvg:
        kernels::adaptive_avg_pool2d(s, ptr(x), ptr(y));
        break;
    }
    ctx->save_for_backward({argmax});
    ctx->saved_data["kind"] = kind;
    ctx->saved_data["options"] = o;
    ctx->saved_data["in"] = x.sizes().vec();
    ctx->mark_non_differentiable({argmax});
    return {y, argmax};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor argmax = ctx->get_saved_variables()[0];
    const auto kind = static_cast<Pool>(ctx->saved_data["kind"].toInt());
    const auto o = ctx->saved_data["options"].toIntVector();
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty(ctx->saved_data["in"].toIntVector(), dy.options());
    const kernels::PoolShape s = shape_of(dx, kind, o);
    if (kind == Pool::kMax || kind == Pool::kAdaptiveMax) {
      kernels::max_pool2d_backward(s, argmax.data_ptr<std::int64_t>(), ptr(dy), ptr(dx));
    } else if (kind == Pool::kAvg) {
      kernels::avg_pool2d_backward(s, avg_options(o), ptr(dy), ptr(dx));
    } else {
      kernels::adaptive_avg_pool2d_backward(s, ptr(dy), ptr(dx));
    }
    return {dx, at::Tensor(), at::Tensor()};
  }

  static kernels::AvgPoolOptions avg_options(const std::vector<std::int64_t>& o) {
    return {o[9] != 0, o[10]};
  }
  static kernels::PoolShape shape_of(const at::Tensor& x, Pool kind,
                                     const std::vector<std::int64_t>& o) {
    kernels::PoolShape s;
    s.planes = x.size(0) * x.size(1);
    s.in_h = x.size(2), s.in_w = x.size(3);
    if (kind == Pool::kAdaptiveAvg || kind == Pool::kAdaptiveMax) {
      s.out_h = o[0], s.out_w = o[1];
      return s;
    }
    s.kernel_h = o[0], s.kernel_w = o[1], s.stride_h = o[2], s.stride_w = o[3];
    s.pad_h = o[4], s.pad_w = o[5], s.dilation_h = o[6], s.dilation_w = o[7];
    const bool ceil = o[8] != 0;
    s.out_h = kernels::pool_out_size(s.in_h, s.kernel_h, s.stride_h, s.pad_h, s.dilation_h, ceil);
    s.out_w = kernels::pool_out_size(s.in_w, s.kernel_w, s.stride_w, s.pad_w, s.dilation_w, ceil);
    return s;
  }
};

// A [C, H, W] input pools as a batch of one.
at::Tensor batched(const at::Tensor& x) { return x.dim() == 3 ? x.unsqueeze(0) : x; }
at::Tensor unbatched(const at::Tensor& y, const at::Tensor& x) {
  return x.dim() == 3 ? y.squeeze(0) : y;
}

std::vector<std::int64_t> pair_of(at::IntArrayRef v, std::int64_t fallback, const char* what) {
  if (v.empty()) return {fallback, fallback};
  TORCH_CHECK(v.size() == 1 || v.size() == 2, "portable pooling: ", what, " ", v);
  return {v[0], v.size() == 2 ? v[1] : v[0]};
}

std::vector<std::int64_t> window_options(at::IntArrayRef kernel, at::IntArrayRef stride,
                                         at::IntArrayRef padding, at::IntArrayRef dilation,
                                         bool ceil_mode) {
  const auto k = pair_of(kernel, 1, "kernel_size");
  const auto s = stride.empty() ? k : pair_of(stride, 1, "stride");
  const auto p = pair_of(padding, 0, "padding"), d = pair_of(dilation, 1, "dilation");
  for (int i = 0; i < 2; ++i) {
    TORCH_CHECK(k[i] > 0 && s[i] > 0 && d[i] > 0 && p[i] >= 0 && p[i] <= k[i] / 2,
                "portable pooling: kernel ", kernel, ", stride ", stride, ", padding ", padding,
                " (padding at most half the kernel)");
  }
  return {k[0], k[1], s[0], s[1], p[0], p[1], d[0], d[1], ceil_mode ? 1 : 0, 0, 0};
}

}  // namespace

at::Tensor activation(const at::Tensor& x, kernels::Activation f,
                      const kernels::ActivationParams& p) {
  return ActivationFn::apply(
      x, code_of(f),
      std::vector<double>{p.min_val, p.max_val, p.slope, p.alpha, p.beta, p.threshold});
}

at::Tensor max_pool2d(const at::Tensor& x, at::IntArrayRef kernel, at::IntArrayRef stride,
                      at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                      at::Tensor* indices) {
  auto out = PoolFn::apply(batched(x), static_cast<std::int64_t>(Pool::kMax),
                           window_options(kernel, stride, padding, dilation, ceil_mode));
  if (indices != nullptr) *indices = unbatched(out[1], x);
  return unbatched(out[0], x);
}

at::Tensor avg_pool2d(const at::Tensor& x, at::IntArrayRef kernel, at::IntArrayRef stride,
                      at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<std::int64_t> divisor_override) {
  std::vector<std::int64_t> o = window_options(kernel, stride, padding, {}, ceil_mode);
  o[9] = count_include_pad ? 1 : 0;
  o[10] = divisor_override.value_or(0);
  TORCH_CHECK(!divisor_override || *divisor_override != 0,
              "portable avg_pool2d: divisor_override 0");
  return unbatched(
      PoolFn::apply(batched(x), static_cast<std::int64_t>(Pool::kAvg), std::move(o))[0], x);
}

at::Tensor adaptive_avg_pool2d(const at::Tensor& x, at::IntArrayRef output_size) {
  const auto out = pair_of(output_size, 1, "output_size");
  return unbatched(PoolFn::apply(batched(x), static_cast<std::int64_t>(Pool::kAdaptiveAvg),
                                 std::vector<std::int64_t>{out[0], out[1]})[0],
                   x);
}

std::tuple<at::Tensor, at::Tensor> adaptive_max_pool2d(const at::Tensor& x,
                                                       at::IntArrayRef output_size) {
  const auto out = pair_of(output_size, 1, "output_size");
  auto y = PoolFn::apply(batched(x), static_cast<std::int64_t>(Pool::kAdaptiveMax),
                         std::vector<std::int64_t>{out[0], out[1]});
  return {unbatched(y[0], x), unbatched(y[1], x)};
}

// --- bilinear upsampling ------------------------------------------------------------------------

namespace {

// scales: the caller's scale factors (height, width), empty when it gave an output size.
struct UpsampleFn : torch::autograd::Function<UpsampleFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in,
                            std::vector<std::int64_t> out, bool align_corners,
                            std::vector<double> scales) {
    const at::Tensor x = operand(x_in, "upsample_bilinear2d");
    const kernels::PoolShape s = shape_of(x, out);
    at::Tensor y = at::empty({x.size(0), x.size(1), s.out_h, s.out_w}, x.options());
    kernels::upsample_bilinear2d(s, options(s, align_corners, scales), ptr(x), ptr(y));
    ctx->saved_data["in"] = x.sizes().vec();
    ctx->saved_data["out"] = out;
    ctx->saved_data["align_corners"] = align_corners;
    ctx->saved_data["scales"] = scales;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty(ctx->saved_data["in"].toIntVector(), dy.options());
    const kernels::PoolShape s = shape_of(dx, ctx->saved_data["out"].toIntVector());
    const auto o = options(s, ctx->saved_data["align_corners"].toBool(),
                           ctx->saved_data["scales"].toDoubleVector());
    kernels::upsample_bilinear2d_backward(s, o, ptr(dy), ptr(dx));
    return {dx, at::Tensor(), at::Tensor(), at::Tensor()};
  }

  static kernels::PoolShape shape_of(const at::Tensor& x, const std::vector<std::int64_t>& out) {
    kernels::PoolShape s;
    s.planes = x.size(0) * x.size(1);
    s.in_h = x.size(2), s.in_w = x.size(3);
    s.out_h = out[0], s.out_w = out[1];
    return s;
  }
  static kernels::BilinearOptions options(const kernels::PoolShape& s, bool align_corners,
                                          const std::vector<double>& scales) {
    const double sh = scales.empty() ? 0.0 : scales[0], sw = scales.empty() ? 0.0 : scales[1];
    return {align_corners, kernels::upsample_scale(s.in_h, s.out_h, align_corners, sh),
            kernels::upsample_scale(s.in_w, s.out_w, align_corners, sw)};
  }
};

}  // namespace

at::Tensor upsample_bilinear2d(const at::Tensor& x, const std::vector<std::int64_t>& output_size,
                               bool align_corners, const std::vector<double>& scales) {
  TORCH_CHECK(x.dim() == 4, "portable upsample_bilinear2d: [B, C, H, W] input, got ", x.sizes());
  TORCH_CHECK(output_size.empty() != scales.empty(),
              "portable upsample_bilinear2d: give an output size or scale factors, not both");
  std::vector<std::int64_t> out(2);
  std::vector<double> factors;
  if (!output_size.empty()) {
    TORCH_CHECK(output_size.size() == 2, "portable upsample_bilinear2d: output_size of 2");
    out = output_size;
  } else {
    TORCH_CHECK(scales.size() == 2, "portable upsample_bilinear2d: scale_factors of 2");
    factors = scales;
    for (int d = 0; d < 2; ++d) {  // LibTorch's output size: ⌊in · scale⌋
      TORCH_CHECK(factors[static_cast<std::size_t>(d)] > 0.0,
                  "portable upsample_bilinear2d: scale factors must be positive");
      out[static_cast<std::size_t>(d)] = static_cast<std::int64_t>(
          static_cast<double>(x.size(2 + d)) * factors[static_cast<std::size_t>(d)]);
    }
  }
  TORCH_CHECK(out[0] > 0 && out[1] > 0, "portable upsample_bilinear2d: output size ", out,
              " is empty");
  return UpsampleFn::apply(x, std::move(out), align_corners, std::move(factors));
}

namespace {

// [B, C, ...] with 1 to 3 spatial dimensions as [B·C planes, D, H, W] (missing ones of size 1).
kernels::NearestShape nearest_shape(const std::vector<std::int64_t>& in,
                                    const std::vector<std::int64_t>& out,
                                    const std::vector<double>& factors) {
  kernels::NearestShape s;
  s.planes = in[0] * in[1];
  const int spatial = static_cast<int>(in.size()) - 2;
  for (int d = 0; d < spatial; ++d) {
    const int at = 3 - spatial + d;
    const auto k = static_cast<std::size_t>(d);
    s.in[at] = in[k + 2];
    s.out[at] = out[k];
    s.scale[at] =
        kernels::upsample_scale(s.in[at], s.out[at], false, factors.empty() ? 0.0 : factors[k]);
  }
  return s;
}

// factors: the caller's scale factors, empty when it gave an output size.
struct NearestFn : torch::autograd::Function<NearestFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in,
                            std::vector<std::int64_t> out, std::vector<double> factors) {
    const at::Tensor x = operand(x_in, "upsample_nearest");
    const kernels::NearestShape s = nearest_shape(x.sizes().vec(), out, factors);
    std::vector<std::int64_t> y_shape = {x.size(0), x.size(1)};
    y_shape.insert(y_shape.end(), out.begin(), out.end());
    at::Tensor y = at::empty(y_shape, x.options());
    kernels::upsample_nearest(s, ptr(x), ptr(y));
    ctx->saved_data["in"] = x.sizes().vec();
    ctx->saved_data["out"] = out;
    ctx->saved_data["factors"] = factors;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor dy = grads[0].contiguous();
    const std::vector<std::int64_t> in = ctx->saved_data["in"].toIntVector();
    at::Tensor dx = at::empty(in, dy.options());
    kernels::upsample_nearest_backward(nearest_shape(in, ctx->saved_data["out"].toIntVector(),
                                                     ctx->saved_data["factors"].toDoubleVector()),
                                       ptr(dy), ptr(dx));
    return {dx, at::Tensor(), at::Tensor()};
  }
};

}  // namespace

at::Tensor upsample_nearest(const at::Tensor& x, const std::vector<std::int64_t>& output_size,
                            const std::vector<double>& scales) {
  const auto spatial = static_cast<std::size_t>(x.dim()) - 2;
  TORCH_CHECK(x.dim() >= 3 && x.dim() <= 5,
              "portable upsample_nearest: [B, C, W], [B, C, H, W] or [B, C, D, H, W] input, got ",
              x.sizes());
  TORCH_CHECK(output_size.empty() != scales.empty(),
              "portable upsample_nearest: give an output size or scale factors, not both");
  std::vector<std::int64_t> out = output_size;
  if (out.empty()) {
    TORCH_CHECK(scales.size() == spatial, "portable upsample_nearest: ", spatial,
                " scale factors for ", x.sizes());
    for (std::size_t d = 0; d < spatial; ++d) {  // LibTorch's output size: ⌊in · scale⌋
      TORCH_CHECK(scales[d] > 0.0, "portable upsample_nearest: scale factors must be positive");
      out.push_back(static_cast<std::int64_t>(
          static_cast<double>(x.size(static_cast<std::int64_t>(d) + 2)) * scales[d]));
    }
  }
  TORCH_CHECK(out.size() == spatial, "portable upsample_nearest: output_size ", out, " for ",
              x.sizes());
  for (const std::int64_t o : out)
    TORCH_CHECK(o > 0, "portable upsample_nearest: output size ", out, " is empty");
  return NearestFn::apply(x, std::move(out), scales);
}

// --- transposed convolution ---------------------------------------------------------------------

namespace {

struct ConvTransposeFn : torch::autograd::Function<ConvTransposeFn> {
  // o: stride, padding, output_padding, dilation (spatial each), then groups.
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& w_in,
                            const at::Tensor& b_in, std::vector<std::int64_t> o) {
    const at::Tensor x = operand(x_in, "conv_transpose"), w = operand(w_in, "conv_transpose");
    const std::int64_t spatial = w.dim() - 2, groups = o.back();
    TORCH_CHECK(spatial >= 1 && spatial <= 3 && x.dim() == w.dim() && x.size(1) == w.size(0) &&
                    w.size(0) % groups == 0,
                "portable conv_transpose: input ", x.sizes(), " and weight ", w.sizes(),
                " do not fit");
    std::vector<std::int64_t> out = {x.size(0), w.size(1) * groups};
    for (std::int64_t d = 0; d < spatial; ++d) {
      const std::int64_t s = o[d], p = o[spatial + d], op = o[2 * spatial + d],
                         dl = o[3 * spatial + d];
      out.push_back((x.size(2 + d) - 1) * s - 2 * p + dl * (w.size(2 + d) - 1) + op + 1);
    }
    at::Tensor y = at::empty(out, x.options());
    const kernels::ConvShape s = shape(y, w, o);
    const at::Tensor b = b_in.numel() > 0 ? operand(b_in, "conv_transpose") : at::Tensor();
    kernels::conv_transpose_forward(s, groups, ptr(x), ptr(w), ptr_or_null(b), ptr(y));
    ctx->save_for_backward({x, w});
    ctx->saved_data["options"] = o;
    ctx->saved_data["out"] = out;
    ctx->saved_data["bias"] = b.defined();
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1];
    const auto o = ctx->saved_data["options"].toIntVector();
    const at::Tensor dy = grads[0].contiguous();
    const kernels::ConvShape s = shape(dy, w, o);
    at::Tensor dx = at::empty_like(x), dw = at::empty_like(w), db;
    if (ctx->saved_data["bias"].toBool()) db = at::empty({dy.size(1)}, dy.options());
    kernels::conv_transpose_backward(s, o.back(), ptr(x), ptr(w), ptr(dy), ptr(dx), ptr(dw),
                                     ptr_or_null(db));
    return {dx, dw, db, at::Tensor()};
  }
  // The convolution whose dx this is: its input is the transposed output y.
  static kernels::ConvShape shape(const at::Tensor& y, const at::Tensor& w,
                                  const std::vector<std::int64_t>& o) {
    const std::size_t spatial = static_cast<std::size_t>(w.dim() - 2);
    auto part = [&](std::size_t i) {
      return std::vector<std::int64_t>(o.begin() + static_cast<std::ptrdiff_t>(i * spatial),
                                       o.begin() + static_cast<std::ptrdiff_t>((i + 1) * spatial));
    };
    return conv_shape(y, w, part(0), part(1), part(3), o.back());
  }
};

}  // namespace

at::Tensor conv_transpose(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                          at::IntArrayRef stride, at::IntArrayRef padding,
                          at::IntArrayRef output_padding, at::IntArrayRef dilation,
                          std::int64_t groups) {
  std::vector<std::int64_t> o;
  for (at::IntArrayRef part : {stride, padding, output_padding, dilation})
    o.insert(o.end(), part.begin(), part.end());
  o.push_back(groups);
  return ConvTransposeFn::apply(x, w, optional_input(b), std::move(o));
}

// --- products and broadcasts --------------------------------------------------------------------

namespace {

struct BaddbmmFn : torch::autograd::Function<BaddbmmFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& c_in, const at::Tensor& a_in,
                            const at::Tensor& b_in, double beta, double alpha) {
    const at::Tensor a = operand(a_in, "bmm"), b = operand(b_in, "bmm");
    TORCH_CHECK(a.dim() == 3 && b.dim() == 3 && a.size(0) == b.size(0) && a.size(2) == b.size(1),
                "portable bmm: ", a.sizes(), " · ", b.sizes());
    const std::int64_t n = a.size(0), m = a.size(1), k = a.size(2), p = b.size(2);
    at::Tensor c;
    if (c_in.numel() > 0) {
      TORCH_CHECK(c_in.dim() == 3, "portable baddbmm: addend ", c_in.sizes());
      c = operand(c_in, "baddbmm").expand({n, m, p}).contiguous();
    }
    at::Tensor y = at::empty({n, m, p}, a.options());
    kernels::baddbmm(n, m, p, k, ptr(a), ptr(b), ptr_or_null(c), static_cast<float>(alpha),
                     static_cast<float>(beta), ptr(y));
    ctx->save_for_backward({a, b});
    ctx->saved_data["beta"] = beta;
    ctx->saved_data["alpha"] = alpha;
    ctx->saved_data["addend"] = c.defined();
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &a = saved[0], &b = saved[1];
    const at::Tensor dy = grads[0].contiguous();
    const std::int64_t n = a.size(0), m = a.size(1), k = a.size(2), p = b.size(2);
    at::Tensor da = at::empty_like(a), db = at::empty_like(b), dc;
    if (ctx->saved_data["addend"].toBool()) dc = at::empty_like(dy);
    kernels::baddbmm_backward(n, m, p, k, ptr(a), ptr(b), ptr(dy),
                              static_cast<float>(ctx->saved_data["alpha"].toDouble()),
                              static_cast<float>(ctx->saved_data["beta"].toDouble()), ptr(da),
                              ptr(db), ptr_or_null(dc));
    return {dc, da, db, at::Tensor(), at::Tensor()};
  }
};

// x copied to `shape` (leading dimensions added, size-1 dimensions repeated); backward sums each
// element's copies in one chain over the output's storage order.
struct BroadcastFn : torch::autograd::Function<BroadcastFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x,
                            const std::vector<std::int64_t>& shape) {
    ctx->saved_data["in"] = x.sizes().vec();
    return x.expand(shape).contiguous();
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto in = ctx->saved_data["in"].toIntVector();
    const at::Tensor dy = grads[0].contiguous();
    const std::int64_t lead = dy.dim() - static_cast<std::int64_t>(in.size());
    std::vector<std::int64_t> dims;
    for (std::int64_t d = 0; d < dy.dim(); ++d) {
      if (d < lead || (in[static_cast<std::size_t>(d - lead)] == 1 && dy.size(d) != 1))
        dims.push_back(d);
    }
    if (dims.empty()) return {dy.view(in), at::Tensor()};
    at::Tensor dx = reduce(dy, dims, /*keepdim=*/true, kernels::Reduction::kSum);
    return {dx.view(in), at::Tensor()};
  }
};

}  // namespace

at::Tensor baddbmm(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, double beta,
                   double alpha) {
  return BaddbmmFn::apply(optional_input(c), a, b, beta, alpha);
}

at::Tensor broadcast_to(const at::Tensor& x, at::IntArrayRef shape) {
  if (x.sizes() == shape) return x;
  return BroadcastFn::apply(x, shape.vec());
}

at::Tensor matmul(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(a.dim() >= 1 && b.dim() >= 1, "portable matmul: ", a.sizes(), " · ", b.sizes());
  if (a.dim() == 1 && b.dim() == 1)
    return portable::matmul(a.unsqueeze(0), b.unsqueeze(1)).view({});
  if (b.dim() == 1) return portable::matmul(a, b.unsqueeze(1)).squeeze(-1);
  if (a.dim() == 1) return portable::matmul(a.unsqueeze(0), b).squeeze(-2);
  const std::int64_t k = a.size(-1), n = b.size(-1);
  TORCH_CHECK(b.size(-2) == k, "portable matmul: ", a.sizes(), " · ", b.sizes());
  if (b.dim() == 2) {
    // One product of a's rows, whatever its batch dimensions.
    std::vector<std::int64_t> out(a.sizes().begin(), a.sizes().end());
    out.back() = n;
    return baddbmm(at::Tensor(), a.reshape({1, -1, k}), b.unsqueeze(0), 1.0, 1.0).view(out);
  }
  // Batched: the batch dimensions broadcast, each batch its own product.
  const std::vector<std::int64_t> batch_a(a.sizes().begin(), a.sizes().end() - 2);
  const std::vector<std::int64_t> batch_b(b.sizes().begin(), b.sizes().end() - 2);
  const std::vector<std::int64_t> batch = at::infer_size(batch_a, batch_b);
  std::vector<std::int64_t> shape_a = batch, shape_b = batch, out = batch;
  shape_a.insert(shape_a.end(), {a.size(-2), k});
  shape_b.insert(shape_b.end(), {k, n});
  out.insert(out.end(), {a.size(-2), n});
  const at::Tensor ab = portable::broadcast_to(a, shape_a).reshape({-1, a.size(-2), k});
  const at::Tensor bb = portable::broadcast_to(b, shape_b).reshape({-1, k, n});
  return baddbmm(at::Tensor(), ab, bb, 1.0, 1.0).view(out);
}

// --- reductions and softmax ---------------------------------------------------------------------

namespace {

struct ReduceFn : torch::autograd::Function<ReduceFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in,
                            const std::vector<std::int64_t>& dims, bool keepdim,
                            std::int64_t kind) {
    const at::Tensor x = operand(x_in, "reduce");
    std::vector<bool> reduced(static_cast<std::size_t>(x.dim()), dims.empty());
    for (std::int64_t d : dims) reduced[static_cast<std::size_t>(d)] = true;
    std::vector<std::int64_t> out;
    for (std::int64_t d = 0; d < x.dim(); ++d) {
      if (!reduced[static_cast<std::size_t>(d)]) {
        out.push_back(x.size(d));
      } else if (keepdim) {
        out.push_back(1);
      }
    }
    const kernels::ReduceShape s(x.sizes().vec(), reduced);
    TORCH_CHECK(s.count() > 0, "portable reduction over no elements: ", x.sizes());
    at::Tensor y = at::empty(out, x.options());
    const auto r = static_cast<kernels::Reduction>(kind);
    kernels::reduce(r, s, ptr(x), ptr(y));
    ctx->save_for_backward({x, y});
    ctx->saved_data["dims"] = dims;
    ctx->saved_data["kind"] = kind;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &y = saved[1];
    const auto dims = ctx->saved_data["dims"].toIntVector();
    std::vector<bool> reduced(static_cast<std::size_t>(x.dim()), dims.empty());
    for (std::int64_t d : dims) reduced[static_cast<std::size_t>(d)] = true;
    const kernels::ReduceShape s(x.sizes().vec(), reduced);
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty_like(x);
    kernels::reduce_backward(static_cast<kernels::Reduction>(ctx->saved_data["kind"].toInt()), s,
                             ptr(x), ptr(y), ptr(dy), ptr(dx));
    return {dx, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// Softmax (log: log_softmax) over the last dimension of x, made contiguous with it last.
struct LastDimSoftmaxFn : torch::autograd::Function<LastDimSoftmaxFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, bool log) {
    const at::Tensor x = operand(x_in, "softmax");
    const std::int64_t width = x.size(-1), rows = x.numel() / std::max<std::int64_t>(width, 1);
    at::Tensor y = at::empty_like(x);
    if (log) {
      kernels::log_softmax(rows, width, ptr(x), ptr(y));
    } else {
      kernels::softmax(rows, width, ptr(x), 1.0f, /*causal=*/false, ptr(y));
    }
    ctx->save_for_backward({y});
    ctx->saved_data["log"] = log;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor y = ctx->get_saved_variables()[0];
    const at::Tensor dy = grads[0].contiguous();
    const std::int64_t width = y.size(-1), rows = y.numel() / std::max<std::int64_t>(width, 1);
    at::Tensor dx = at::empty_like(y);
    if (ctx->saved_data["log"].toBool()) {
      kernels::log_softmax_backward(rows, width, ptr(y), ptr(dy), ptr(dx));
    } else {
      kernels::softmax_backward(rows, width, ptr(y), ptr(dy), 1.0f, false, ptr(dx));
    }
    return {dx, at::Tensor()};
  }
};

at::Tensor along(const at::Tensor& x, std::int64_t dim, bool log) {
  if (x.dim() == 0) return LastDimSoftmaxFn::apply(x.view({1}), log).view({});
  const std::int64_t d = at::maybe_wrap_dim(dim, x.dim());
  if (d == x.dim() - 1) return LastDimSoftmaxFn::apply(x, log);
  return LastDimSoftmaxFn::apply(x.transpose(d, -1), log).transpose(d, -1);
}

}  // namespace

at::Tensor reduce(const at::Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim,
                  kernels::Reduction r) {
  std::vector<std::int64_t> wrapped;
  for (const std::int64_t d : dims) wrapped.push_back(at::maybe_wrap_dim(d, x.dim()));
  std::sort(wrapped.begin(), wrapped.end());
  wrapped.erase(std::unique(wrapped.begin(), wrapped.end()), wrapped.end());
  if (x.dim() == 0)
    return ReduceFn::apply(x.view({1}), wrapped, false, static_cast<std::int64_t>(r)).view({});
  return ReduceFn::apply(x, wrapped, keepdim, static_cast<std::int64_t>(r));
}

at::Tensor softmax(const at::Tensor& x, std::int64_t dim) { return along(x, dim, false); }
at::Tensor log_softmax(const at::Tensor& x, std::int64_t dim) { return along(x, dim, true); }

}  // namespace vt::training::portable
