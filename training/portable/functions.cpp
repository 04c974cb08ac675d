// Differentiable LibTorch functions over the portable kernels. Every floating-point operation
// happens in kernels/; here are only shapes, contiguous copies (exact) and which kernel runs.
#include "training/portable/functions.h"

#include <torch/torch.h>

#include <vector>

#include "kernels/conv.h"
#include "kernels/gemm.h"
#include "kernels/norm.h"
#include "kernels/pointwise.h"
#include "kernels/softmax.h"
#include "training/portable/tensor.h"

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

// Where each head's q, k, v (in a [B, T, 3D] buffer) and output (in [B, T, D]) lie: problem
// b·H + h of a batched product starts h·d floats into example b.
struct Heads {
  std::int64_t batch, tokens, heads, width;  // width: d = D / heads
  std::int64_t model() const { return heads * width; }
  kernels::BatchStride in() const { return {width, heads, tokens * 3 * model()}; }
  kernels::BatchStride out() const { return {width, heads, tokens * model()}; }
};

// The kernel calls of split heads, q·kᵀ, softmax, dropout and ·v, with operands read and results
// written where they lie: the values and calls are those of the separate operators
// (docs/portable.md, "Attention"), without their copies and autograd nodes.
struct AttentionFn : torch::autograd::Function<AttentionFn> {
  // p == 0: no dropout (and no draw).
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& qkv_in, std::int64_t heads,
                            double divisor, double p, std::int64_t state, std::int64_t call) {
    const at::Tensor qkv = operand(qkv_in, "attention");
    TORCH_CHECK(qkv.dim() == 3 && heads > 0 && qkv.size(2) % (3 * heads) == 0,
                "portable attention: ", qkv.sizes(), " is not [B, T, 3D] in ", heads, " heads");
    const Heads h{qkv.size(0), qkv.size(1), heads, qkv.size(2) / (3 * heads)};
    const std::int64_t n = h.batch * heads, t = h.tokens, d = h.model(), dh = h.width;
    const float* q = ptr(qkv);
    const float* k = q + d;
    const float* v = q + 2 * d;
    at::Tensor scores = at::empty({n, t, t}, qkv.options());
    kernels::gemm(n, t, t, dh, {q, 3 * d, 1}, h.in(), {k, 1, 3 * d}, h.in(), ptr(scores), t, t * t,
                  false);
    at::Tensor probs = at::empty_like(scores);
    kernels::softmax(n * t, t, ptr(scores), static_cast<float>(divisor), /*causal=*/true,
                     ptr(probs));
    at::Tensor dropped = probs;
    if (p != 0.0) {
      dropped = at::empty_like(probs);
      kernels::dropout(probs.numel(), ptr(probs), static_cast<float>(p),
                       static_cast<std::uint64_t>(state), static_cast<std::uint64_t>(call),
                       ptr(dropped));
    }
    at::Tensor out = at::empty({h.batch, t, d}, qkv.options());
    kernels::gemm(n, t, dh, t, {ptr(dropped), t, 1}, t * t, {v, 3 * d, 1}, h.in(), ptr(out), d,
                  h.out(), false);
    ctx->save_for_backward({qkv, probs, dropped});
    ctx->saved_data["heads"] = heads;
    ctx->saved_data["divisor"] = divisor;
    keep_draw(ctx, p, state, call);
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &qkv = saved[0], &probs = saved[1], &dropped = saved[2];
    const std::int64_t heads = ctx->saved_data["heads"].toInt();
    const Heads h{qkv.size(0), qkv.size(1), heads, qkv.size(2) / (3 * heads)};
    const std::int64_t n = h.batch * heads, t = h.tokens, d = h.model(), dh = h.width;
    const at::Tensor d_out = grads[0].contiguous();
    const float* q = ptr(qkv);
    const float* k = q + d;
    const float* v = q + 2 * d;
    at::Tensor dqkv = at::empty_like(qkv);
    float* dq = ptr(dqkv);
    // The product with v: d(dropped) = d_out · vᵀ (chains over the head width), dv = droppedᵀ ·
    // d_out (chains over the queries).
    at::Tensor d_dropped = at::empty_like(probs);
    kernels::gemm(n, t, t, dh, {ptr(d_out), d, 1}, h.out(), {v, 1, 3 * d}, h.in(), ptr(d_dropped),
                  t, t * t, false);
    kernels::gemm(n, t, dh, t, {ptr(dropped), 1, t}, t * t, {ptr(d_out), d, 1}, h.out(), dq + 2 * d,
                  3 * d, h.in(), false);
    at::Tensor d_probs = d_dropped;
    const DropoutDraw draw = kept_draw(ctx);
    if (draw.p != 0.0f) {
      d_probs = at::empty_like(probs);
      kernels::dropout_backward(probs.numel(), ptr(d_dropped), draw.p, draw.state, draw.call,
                                ptr(d_probs));
    }
    at::Tensor d_scores = at::empty_like(probs);
    kernels::softmax_backward(n * t, t, ptr(probs), ptr(d_probs),
                              static_cast<float>(ctx->saved_data["divisor"].toDouble()),
                              /*causal=*/true, ptr(d_scores));
    // The product q·kᵀ: dq = d_scores · k (chains over the keys); d(kᵀ) = qᵀ · d_scores (chains
    // over the queries), made as kᵀ's [d, T] blocks and copied into k's place.
    kernels::gemm(n, t, dh, t, {ptr(d_scores), t, 1}, t * t, {k, 3 * d, 1}, h.in(), dq, 3 * d,
                  h.in(), false);
    at::Tensor dkt = at::empty({h.batch, heads, dh, t}, qkv.options());
    kernels::gemm(n, dh, t, t, {q, 1, 3 * d}, h.in(), {ptr(d_scores), t, 1}, t * t, ptr(dkt), t,
                  dh * t, false);
    dqkv.view({h.batch, t, 3, heads, dh}).select(2, 1).copy_(dkt.permute({0, 3, 1, 2}));
    return {dqkv, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
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
at::Tensor attention(const at::Tensor& qkv, std::int64_t heads, double divisor, double p,
                     std::uint64_t state, std::uint64_t call) {
  return AttentionFn::apply(qkv, heads, divisor, p, static_cast<std::int64_t>(state),
                            static_cast<std::int64_t>(call));
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
