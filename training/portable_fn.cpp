// Differentiable LibTorch functions over the portable kernels. Every floating-point operation
// happens in kernels/; here are only shapes, contiguous copies (exact) and which kernel runs.
#include "training/internal/portable_fn.h"

#include <torch/torch.h>

#include <vector>

#include "kernels/conv.h"
#include "kernels/gemm.h"
#include "kernels/norm.h"
#include "kernels/pointwise.h"
#include "kernels/softmax.h"
#include "training/internal/portable_tensor.h"

namespace vt::training::portable {
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

struct LinearFn : torch::autograd::Function<LinearFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& w_in,
                            const at::Tensor& b_in) {
    const at::Tensor x = operand(x_in, "linear"), w = operand(w_in, "linear");
    const std::int64_t k = x.size(-1), n = w.size(0), m = x.numel() / k;
    TORCH_CHECK(w.size(1) == k, "portable linear: input width ", k, ", weight ", w.sizes());
    std::vector<std::int64_t> shape(x.sizes().begin(), x.sizes().end());
    shape.back() = n;
    at::Tensor y = at::empty(shape, x.options());
    kernels::gemm(m, n, k, {ptr(x), k, 1}, {ptr(w), 1, k}, ptr(y), n);
    if (b_in.numel() > 0) kernels::add_bias(m, n, ptr(y), ptr(operand(b_in, "linear")));
    ctx->save_for_backward({x, w});
    ctx->saved_data["bias"] = b_in.numel() > 0;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1];
    const at::Tensor dy = grads[0].contiguous();
    const std::int64_t k = x.size(-1), n = w.size(0), m = x.numel() / k;
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) {
      dx = at::empty_like(x);
      kernels::gemm(m, k, n, {ptr(dy), n, 1}, {ptr(w), k, 1}, ptr(dx), k);
    }
    if (ctx->needs_input_grad(1)) {
      dw = at::empty_like(w);
      kernels::gemm(n, k, m, {ptr(dy), 1, n}, {ptr(x), k, 1}, ptr(dw), k);
    }
    if (ctx->needs_input_grad(2) && ctx->saved_data["bias"].toBool()) {
      db = at::empty({n}, x.options());
      kernels::column_sums(m, n, ptr(dy), n, ptr(db));
    }
    return {dx, dw, db};
  }
};

}  // namespace

// The convolution of input x ([B, C, ...]) by w ([O, C/G, k...]): 1-d convolutions are 2-d ones
// of height 1, 2-d ones 3-d of depth 1.
kernels::ConvShape conv_shape(const at::Tensor& x, const at::Tensor& w,
                              const std::vector<std::int64_t>& stride,
                              const std::vector<std::int64_t>& padding,
                              const std::vector<std::int64_t>& dilation, std::int64_t groups) {
  kernels::ConvShape s;
  const int spatial = static_cast<int>(w.dim()) - 2;  // 1, 2 or 3
  s.batch = x.size(0);
  s.in_channels = w.size(1) * groups;
  s.out_channels = w.size(0);
  for (int d = 0; d < spatial; ++d) {
    const int at = 3 - spatial + d;
    s.in[at] = x.size(2 + d);
    s.kernel[at] = w.size(2 + d);
    s.stride[at] = stride[static_cast<std::size_t>(d)];
    s.padding[at] = padding[static_cast<std::size_t>(d)];
    s.dilation[at] = dilation[static_cast<std::size_t>(d)];
  }
  return s;
}

namespace {

struct ConvFn : torch::autograd::Function<ConvFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& w_in,
                            const at::Tensor& b_in, const std::vector<std::int64_t>& stride,
                            const std::vector<std::int64_t>& padding,
                            const std::vector<std::int64_t>& dilation, std::int64_t groups) {
    const at::Tensor x = operand(x_in, "conv"), w = operand(w_in, "conv");
    TORCH_CHECK(w.dim() >= 3 && w.dim() <= 5 && x.dim() == w.dim() && groups >= 1 &&
                    x.size(1) == w.size(1) * groups && w.size(0) % groups == 0,
                "portable conv: input ", x.sizes(), " and weight ", w.sizes(), " in ", groups,
                " groups do not fit");
    const kernels::ConvShape s = conv_shape(x, w, stride, padding, dilation, groups);
    std::vector<std::int64_t> shape = {s.batch, s.out_channels};
    for (int d = 3 - static_cast<int>(w.dim() - 2); d < 3; ++d) {
      TORCH_CHECK(s.out(d) > 0, "portable conv: the kernel does not fit the input ", x.sizes());
      shape.push_back(s.out(d));
    }
    at::Tensor y = at::empty(shape, x.options());
    const at::Tensor b = b_in.numel() > 0 ? operand(b_in, "conv") : at::Tensor();
    kernels::grouped_conv_forward(s, groups, ptr(x), ptr(w), ptr_or_null(b), ptr(y));
    ctx->save_for_backward({x, w});
    ctx->saved_data["stride"] = stride;
    ctx->saved_data["padding"] = padding;
    ctx->saved_data["dilation"] = dilation;
    ctx->saved_data["groups"] = groups;
    ctx->saved_data["bias"] = b.defined();
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1];
    const std::int64_t groups = ctx->saved_data["groups"].toInt();
    const kernels::ConvShape s = conv_shape(x, w, ctx->saved_data["stride"].toIntVector(),
                                            ctx->saved_data["padding"].toIntVector(),
                                            ctx->saved_data["dilation"].toIntVector(), groups);
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx, dw, db;
    if (ctx->needs_input_grad(0)) dx = at::empty_like(x);
    if (ctx->needs_input_grad(1)) dw = at::empty_like(w);
    if (ctx->needs_input_grad(2) && ctx->saved_data["bias"].toBool())
      db = at::empty({s.out_channels}, x.options());
    kernels::grouped_conv_backward(s, groups, ptr(x), ptr(w), ptr(dy), ptr_or_null(dx),
                                   ptr_or_null(dw), ptr_or_null(db));
    return {dx, dw, db, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

kernels::BatchNormShape bn_shape(const at::Tensor& x) {
  return {x.size(0), x.size(1), x.numel() / (x.size(0) * x.size(1))};
}

struct BatchNormFn : torch::autograd::Function<BatchNormFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& w,
                            const at::Tensor& b, const at::Tensor& running_mean,
                            const at::Tensor& running_var, bool training, double momentum,
                            double eps, bool relu) {
    const at::Tensor x = operand(x_in, "batch_norm");
    TORCH_CHECK(training || !relu, "portable batch_norm: relu fused in training passes only");
    const kernels::BatchNormShape s = bn_shape(x);
    TORCH_CHECK(running_mean.is_contiguous() && running_var.is_contiguous(),
                "portable batch_norm: running statistics must be contiguous");
    at::Tensor y = at::empty_like(x);
    if (!training) {
      kernels::batch_norm_eval(s, ptr(x), ptr_or_null(w), ptr_or_null(b), ptr(running_mean),
                               ptr(running_var), static_cast<float>(eps), ptr(y));
      ctx->saved_data["training"] = false;
      return y;
    }
    TORCH_CHECK(s.batch * s.spatial > 1,
                "portable batch_norm: a batch statistic needs more than one value per channel");
    at::Tensor mean = at::empty({s.channels}, x.options());
    at::Tensor invstd = at::empty({s.channels}, x.options());
    kernels::batch_norm_train(s, ptr(x), ptr_or_null(w), ptr_or_null(b), static_cast<float>(eps),
                              static_cast<float>(momentum), ptr(running_mean), ptr(running_var),
                              ptr(y), ptr(mean), ptr(invstd), relu);
    // The relu's output masks the gradient: the relu's own input is never kept.
    ctx->save_for_backward({x, w, mean, invstd, relu ? y : at::Tensor()});
    ctx->saved_data["training"] = true;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    TORCH_CHECK(ctx->saved_data["training"].toBool(),
                "portable batch_norm: no gradient in evaluation mode");
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &mean = saved[2], &invstd = saved[3];
    const at::Tensor& relu_y = saved[4];
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty_like(x);
    at::Tensor dw = w.numel() > 0 ? at::empty_like(w) : at::Tensor();
    at::Tensor db = w.numel() > 0 ? at::empty_like(w) : at::Tensor();
    kernels::batch_norm_backward(bn_shape(x), ptr(x), ptr_or_null(w), ptr(mean), ptr(invstd),
                                 ptr(dy), ptr(dx), ptr_or_null(dw), ptr_or_null(db),
                                 ptr_or_null(relu_y));
    return {dx,           dw,           db,           at::Tensor(), at::Tensor(),
            at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct LayerNormFn : torch::autograd::Function<LayerNormFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& w,
                            const at::Tensor& b, double eps) {
    const at::Tensor x = operand(x_in, "layer_norm");
    const std::int64_t width = x.size(-1), rows = x.numel() / width;
    at::Tensor y = at::empty_like(x);
    at::Tensor mean = at::empty({rows}, x.options()), rstd = at::empty({rows}, x.options());
    kernels::layer_norm(rows, width, ptr(x), ptr_or_null(w), ptr_or_null(b),
                        static_cast<float>(eps), ptr(y), ptr(mean), ptr(rstd));
    ctx->save_for_backward({x, w, mean, rstd});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1], &mean = saved[2], &rstd = saved[3];
    const std::int64_t width = x.size(-1), rows = x.numel() / width;
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty_like(x);
    at::Tensor dw = w.numel() > 0 ? at::empty_like(w) : at::Tensor();
    at::Tensor db = w.numel() > 0 ? at::empty_like(w) : at::Tensor();
    kernels::layer_norm_backward(rows, width, ptr(x), ptr_or_null(w), ptr(mean), ptr(rstd), ptr(dy),
                                 ptr(dx), ptr_or_null(dw), ptr_or_null(db));
    return {dx, dw, db, at::Tensor()};
  }
};

struct EmbeddingFn : torch::autograd::Function<EmbeddingFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& ids_in,
                            const at::Tensor& table_in) {
    const at::Tensor ids = ids_in.to(at::kLong).contiguous();
    const at::Tensor table = operand(table_in, "embedding");
    const std::int64_t width = table.size(1), count = ids.numel();
    const std::int64_t* id = ids.data_ptr<std::int64_t>();
    for (std::int64_t i = 0; i < count; ++i) {
      TORCH_CHECK(id[i] >= 0 && id[i] < table.size(0), "portable embedding: id ", id[i],
                  " outside the table's ", table.size(0), " rows");
    }
    std::vector<std::int64_t> shape(ids.sizes().begin(), ids.sizes().end());
    shape.push_back(width);
    at::Tensor y = at::empty(shape, table.options());
    kernels::embedding(count, width, ids.data_ptr<std::int64_t>(), ptr(table), ptr(y));
    ctx->save_for_backward({ids});
    ctx->saved_data["rows"] = table.size(0);
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor ids = ctx->get_saved_variables()[0];
    const at::Tensor dy = grads[0].contiguous();
    const std::int64_t rows = ctx->saved_data["rows"].toInt(), width = dy.size(-1);
    at::Tensor dtable = at::empty({rows, width}, dy.options());
    kernels::embedding_backward(ids.numel(), width, rows, ids.data_ptr<std::int64_t>(), ptr(dy),
                                ptr(dtable));
    return {at::Tensor(), dtable};
  }
};

struct AddRowsFn : torch::autograd::Function<AddRowsFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b) {
    TORCH_CHECK(a.dim() == b.dim() + 1 && a.sizes().slice(1) == b.sizes(),
                "portable add_rows: ", a.sizes(), " + ", b.sizes());
    ctx->saved_data["rows"] = a.size(0);
    ctx->saved_data["shape"] = b.sizes().vec();
    return operand(a, "add_rows") + operand(b, "add_rows");  // one IEEE addition per element
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor dy = grads[0].contiguous();
    const std::int64_t rows = ctx->saved_data["rows"].toInt();
    at::Tensor db = at::empty(ctx->saved_data["shape"].toIntVector(), dy.options());
    kernels::column_sums(rows, db.numel(), ptr(dy), db.numel(), ptr(db));
    return {dy, db};
  }
};

struct SplitHeadsFn : torch::autograd::Function<SplitHeadsFn> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& qkv_in, std::int64_t heads) {
    const at::Tensor qkv = operand(qkv_in, "split_heads");
    const std::int64_t b = qkv.size(0), t = qkv.size(1), d = qkv.size(2) / 3, dh = d / heads;
    TORCH_CHECK(qkv.size(2) == 3 * d && d == heads * dh, "portable split_heads: ", qkv.sizes(),
                " in ", heads, " heads");
    const at::Tensor x = qkv.view({b, t, 3, heads, dh});
    ctx->saved_data["sizes"] = std::vector<std::int64_t>{b, t, heads, dh};
    return {x.select(2, 0).permute({0, 2, 1, 3}).contiguous().view({b * heads, t, dh}),
            x.select(2, 1).permute({0, 2, 3, 1}).contiguous().view({b * heads, dh, t}),
            x.select(2, 2).permute({0, 2, 1, 3}).contiguous().view({b * heads, t, dh})};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto z = ctx->saved_data["sizes"].toIntVector();
    const std::int64_t b = z[0], t = z[1], heads = z[2], dh = z[3];
    at::Tensor dqkv = at::zeros({b, t, 3, heads, dh}, grads[0].defined()   ? grads[0].options()
                                                      : grads[1].defined() ? grads[1].options()
                                                                           : grads[2].options());
    if (grads[0].defined())
      dqkv.select(2, 0).copy_(grads[0].view({b, heads, t, dh}).permute({0, 2, 1, 3}));
    if (grads[1].defined())
      dqkv.select(2, 1).copy_(grads[1].view({b, heads, dh, t}).permute({0, 3, 1, 2}));
    if (grads[2].defined())
      dqkv.select(2, 2).copy_(grads[2].view({b, heads, t, dh}).permute({0, 2, 1, 3}));
    return {dqkv.view({b, t, 3 * heads * dh}), at::Tensor()};
  }
};

struct DropoutFn : torch::autograd::Function<DropoutFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, double p,
                            std::int64_t state, std::int64_t call) {
    const at::Tensor x = operand(x_in, "dropout");
    at::Tensor y = at::empty_like(x);
    kernels::dropout(x.numel(), ptr(x), static_cast<float>(p), static_cast<std::uint64_t>(state),
                     static_cast<std::uint64_t>(call), ptr(y));
    keep_draw(ctx, p, state, call);
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty_like(dy);
    const DropoutDraw draw = kept_draw(ctx);
    kernels::dropout_backward(dy.numel(), ptr(dy), draw.p, draw.state, draw.call, ptr(dx));
    return {dx, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct ReluFn : torch::autograd::Function<ReluFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in) {
    const at::Tensor x = operand(x_in, "relu");
    at::Tensor y = at::empty_like(x);
    kernels::relu(x.numel(), ptr(x), ptr(y));
    ctx->save_for_backward({y});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor y = ctx->get_saved_variables()[0];
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty_like(y);
    kernels::relu_backward(y.numel(), ptr(y), ptr(dy), ptr(dx));
    return {dx};
  }
};

struct GeluFn : torch::autograd::Function<GeluFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in) {
    const at::Tensor x = operand(x_in, "gelu");
    at::Tensor y = at::empty_like(x);
    kernels::gelu(x.numel(), ptr(x), ptr(y));
    ctx->save_for_backward({x});
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor x = ctx->get_saved_variables()[0];
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty_like(x);
    kernels::gelu_backward(x.numel(), ptr(x), ptr(dy), ptr(dx));
    return {dx};
  }
};

struct SpatialMeanFn : torch::autograd::Function<SpatialMeanFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in) {
    const at::Tensor x = operand(x_in, "spatial_mean");
    const std::int64_t rows = x.size(0) * x.size(1), width = x.numel() / rows;
    at::Tensor y = at::empty({x.size(0), x.size(1)}, x.options());
    kernels::row_mean(rows, width, ptr(x), ptr(y));
    ctx->saved_data["shape"] = x.sizes().vec();
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const std::vector<std::int64_t> shape = ctx->saved_data["shape"].toIntVector();
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty(shape, dy.options());
    const std::int64_t rows = shape[0] * shape[1], width = dx.numel() / rows;
    kernels::row_mean_backward(rows, width, ptr(dy), ptr(dx));
    return {dx};
  }
};

struct BmmFn : torch::autograd::Function<BmmFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a_in, const at::Tensor& b_in) {
    const at::Tensor a = operand(a_in, "bmm"), b = operand(b_in, "bmm");
    const std::int64_t n = a.size(0), m = a.size(1), k = a.size(2), p = b.size(2);
    TORCH_CHECK(b.size(0) == n && b.size(1) == k, "portable bmm: ", a.sizes(), " · ", b.sizes());
    at::Tensor c = at::empty({n, m, p}, a.options());
    kernels::gemm(n, m, p, k, {ptr(a), k, 1}, m * k, {ptr(b), p, 1}, k * p, ptr(c), p, m * p,
                  false);
    ctx->save_for_backward({a, b});
    return c;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &a = saved[0], &b = saved[1];
    const at::Tensor dc = grads[0].contiguous();
    const std::int64_t n = a.size(0), m = a.size(1), k = a.size(2), p = b.size(2);
    at::Tensor da, db;
    if (ctx->needs_input_grad(0)) {  // dA = dC · Bᵀ: chains over p
      da = at::empty_like(a);
      kernels::gemm(n, m, k, p, {ptr(dc), p, 1}, m * p, {ptr(b), 1, p}, k * p, ptr(da), k, m * k,
                    false);
    }
    if (ctx->needs_input_grad(1)) {  // dB = Aᵀ · dC: chains over m
      db = at::empty_like(b);
      kernels::gemm(n, k, p, m, {ptr(a), 1, k}, m * k, {ptr(dc), p, 1}, m * p, ptr(db), p, k * p,
                    false);
    }
    return {da, db};
  }
};

struct SoftmaxFn : torch::autograd::Function<SoftmaxFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, double divisor,
                            bool causal) {
    const at::Tensor x = operand(x_in, "softmax");
    const std::int64_t width = x.size(-1), rows = x.numel() / width;
    TORCH_CHECK(!causal || (x.dim() >= 2 && x.size(-2) == width),
                "portable softmax: a causal mask needs [T, T] blocks, got ", x.sizes());
    at::Tensor y = at::empty_like(x);
    kernels::softmax(rows, width, ptr(x), static_cast<float>(divisor), causal, ptr(y));
    ctx->save_for_backward({y});
    ctx->saved_data["divisor"] = divisor;
    ctx->saved_data["causal"] = causal;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor y = ctx->get_saved_variables()[0];
    const at::Tensor dy = grads[0].contiguous();
    const std::int64_t width = y.size(-1), rows = y.numel() / width;
    at::Tensor dx = at::empty_like(y);
    kernels::softmax_backward(rows, width, ptr(y), ptr(dy),
                              static_cast<float>(ctx->saved_data["divisor"].toDouble()),
                              ctx->saved_data["causal"].toBool(), ptr(dx));
    return {dx, at::Tensor(), at::Tensor()};
  }
};

struct CrossEntropyFn : torch::autograd::Function<CrossEntropyFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& logits_in,
                            const at::Tensor& targets_in) {
    const at::Tensor logits = operand(logits_in, "cross_entropy");
    const at::Tensor targets = targets_in.to(at::kLong).contiguous();
    const std::int64_t rows = logits.size(0), classes = logits.size(1);
    at::Tensor row_max = at::empty({rows}, logits.options());
    at::Tensor row_sum = at::empty({rows}, logits.options());
    const float loss = kernels::cross_entropy(
        rows, classes, ptr(logits), targets.data_ptr<std::int64_t>(), ptr(row_max), ptr(row_sum));
    ctx->save_for_backward({logits, targets, row_max, row_sum});
    return at::full({}, loss, logits.options());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &logits = saved[0], &targets = saved[1];
    at::Tensor dlogits = at::empty_like(logits);
    kernels::cross_entropy_backward(logits.size(0), logits.size(1), ptr(logits),
                                    targets.data_ptr<std::int64_t>(), ptr(saved[2]), ptr(saved[3]),
                                    grads[0].item<float>(), ptr(dlogits));
    return {dlogits, at::Tensor()};
  }
};

struct MseFn : torch::autograd::Function<MseFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& out_in,
                            const at::Tensor& target_in) {
    const at::Tensor out = operand(out_in, "mse"), target = operand(target_in, "mse");
    TORCH_CHECK(out.sizes() == target.sizes(), "portable mse: ", out.sizes(), " vs ",
                target.sizes());
    ctx->save_for_backward({out, target});
    return at::full({}, kernels::mse(out.numel(), ptr(out), ptr(target)), out.options());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    at::Tensor d = at::empty_like(saved[0]);
    kernels::mse_backward(d.numel(), ptr(saved[0]), ptr(saved[1]), grads[0].item<float>(), ptr(d));
    return {d, at::Tensor()};
  }
};

}  // namespace

at::Tensor linear(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b) {
  return LinearFn::apply(x, w, optional_input(b));
}
at::Tensor conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                at::IntArrayRef stride, at::IntArrayRef padding) {
  const std::vector<std::int64_t> ones(stride.size(), 1);
  return ConvFn::apply(x, w, optional_input(b), stride.vec(), padding.vec(), ones, 1);
}
at::Tensor conv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                at::IntArrayRef stride, at::IntArrayRef padding, at::IntArrayRef dilation,
                std::int64_t groups) {
  return ConvFn::apply(x, w, optional_input(b), stride.vec(), padding.vec(), dilation.vec(),
                       groups);
}
at::Tensor batch_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                      const at::Tensor& running_mean, const at::Tensor& running_var, bool training,
                      double momentum, double eps, bool relu) {
  if (relu && !training)
    return ReluFn::apply(
        batch_norm(x, w, b, running_mean, running_var, training, momentum, eps, false));
  return BatchNormFn::apply(x, optional_input(w), optional_input(b), running_mean, running_var,
                            training, momentum, eps, relu);
}
at::Tensor layer_norm(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, double eps) {
  return LayerNormFn::apply(x, optional_input(w), optional_input(b), eps);
}
at::Tensor embedding(const at::Tensor& ids, const at::Tensor& table) {
  return EmbeddingFn::apply(ids, table);
}
at::Tensor add_rows(const at::Tensor& a, const at::Tensor& b) { return AddRowsFn::apply(a, b); }
std::tuple<at::Tensor, at::Tensor, at::Tensor> split_heads(const at::Tensor& qkv,
                                                           std::int64_t heads) {
  auto parts = SplitHeadsFn::apply(qkv, heads);
  return {parts[0], parts[1], parts[2]};
}
at::Tensor dropout(const at::Tensor& x, double p, std::uint64_t state, std::uint64_t call) {
  return DropoutFn::apply(x, p, static_cast<std::int64_t>(state), static_cast<std::int64_t>(call));
}
at::Tensor relu(const at::Tensor& x) { return ReluFn::apply(x); }
at::Tensor gelu(const at::Tensor& x) { return GeluFn::apply(x); }
at::Tensor spatial_mean(const at::Tensor& x) { return SpatialMeanFn::apply(x); }
at::Tensor bmm(const at::Tensor& a, const at::Tensor& b) { return BmmFn::apply(a, b); }
at::Tensor softmax(const at::Tensor& x, double divisor, bool causal) {
  return SoftmaxFn::apply(x, divisor, causal);
}
at::Tensor cross_entropy(const at::Tensor& logits, const at::Tensor& targets) {
  return CrossEntropyFn::apply(logits, targets);
}
at::Tensor mse(const at::Tensor& output, const at::Tensor& target) {
  return MseFn::apply(output, target);
}

}  // namespace vt::training::portable
