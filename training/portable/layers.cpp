// Differentiable LibTorch functions over the portable kernels of real models' layers: group
// norm, the further losses, recurrent layers and the random operators
// (portable/layers.h). Every floating-point operation happens in kernels/; here are
// only shapes, contiguous copies (exact) and which kernel runs.
#include "training/portable/layers.h"

#include <torch/torch.h>

#include <algorithm>
#include <string>

#include "kernels/loss.h"
#include "kernels/norm.h"
#include "kernels/pointwise.h"
#include "training/portable/tensor.h"

namespace vt::training::portable {

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

}  // namespace

// --- group norm, losses -------------------------------------------------------------------------

namespace {

struct GroupNormFn : torch::autograd::Function<GroupNormFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& w,
                            const at::Tensor& b, std::int64_t groups, double eps) {
    const at::Tensor x = operand(x_in, "group_norm");
    TORCH_CHECK(x.dim() >= 2 && groups > 0 && x.size(1) % groups == 0,
                "portable group_norm: ", groups, " groups of ", x.sizes());
    const std::int64_t batch = x.size(0), channels = x.size(1),
                       spatial = x.numel() / std::max<std::int64_t>(batch * channels, 1);
    at::Tensor y = at::empty_like(x);
    at::Tensor mean = at::empty({batch * groups}, x.options()), rstd = at::empty_like(mean);
    kernels::group_norm(batch, channels, spatial, groups, ptr(x), ptr_or_null(w), ptr_or_null(b),
                        static_cast<float>(eps), ptr(y), ptr(mean), ptr(rstd));
    ctx->save_for_backward({x, w, mean, rstd});
    ctx->saved_data["groups"] = groups;
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &w = saved[1];
    const std::int64_t groups = ctx->saved_data["groups"].toInt();
    const std::int64_t batch = x.size(0), channels = x.size(1),
                       spatial = x.numel() / std::max<std::int64_t>(batch * channels, 1);
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty_like(x);
    at::Tensor dw = w.numel() > 0 ? at::empty_like(w) : at::Tensor();
    at::Tensor db = w.numel() > 0 ? at::empty_like(w) : at::Tensor();
    kernels::group_norm_backward(batch, channels, spatial, groups, ptr(x), ptr_or_null(w),
                                 ptr(saved[2]), ptr(saved[3]), ptr(dy), ptr(dx), ptr_or_null(dw),
                                 ptr_or_null(db));
    return {dx, dw, db, at::Tensor(), at::Tensor()};
  }
};

at::Tensor class_ids(const at::Tensor& target, std::int64_t rows, std::int64_t classes,
                     std::int64_t ignore_index, const char* op) {
  at::Tensor t = target.to(at::kLong).contiguous();
  TORCH_CHECK(t.dim() == 1 && t.size(0) == rows, "portable ", op, ": [", rows, "] targets, got ",
              target.sizes());
  const std::int64_t* id = t.data_ptr<std::int64_t>();
  for (std::int64_t r = 0; r < rows; ++r) {
    TORCH_CHECK(id[r] == ignore_index || (id[r] >= 0 && id[r] < classes), "portable ", op,
                ": target ", id[r], " outside the ", classes, " classes");
  }
  return t;
}

// kind 0: nll_loss (param: ignore_index); 1: smoothed cross-entropy (param: eps).
struct ClassLossFn : torch::autograd::Function<ClassLossFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& t_in,
                            std::int64_t kind, double param) {
    const at::Tensor x = operand(x_in, kind == 0 ? "nll_loss" : "cross_entropy");
    TORCH_CHECK(x.dim() == 2, "portable loss: [N, C] input, got ", x.sizes());
    const std::int64_t rows = x.size(0), classes = x.size(1);
    const std::int64_t ignore = kind == 0 ? static_cast<std::int64_t>(param) : -1;
    const at::Tensor t = class_ids(t_in, rows, classes, ignore, "loss");
    float loss = 0.0f;
    at::Tensor mx = at::empty({rows}, x.options()), sm = at::empty({rows}, x.options());
    if (kind == 0) {
      loss = kernels::nll_loss(rows, classes, ptr(x), t.data_ptr<std::int64_t>(), ignore);
    } else {
      loss = kernels::cross_entropy_smoothed(rows, classes, ptr(x), t.data_ptr<std::int64_t>(),
                                             static_cast<float>(param), ptr(mx), ptr(sm));
    }
    ctx->save_for_backward({x, t, mx, sm});
    ctx->saved_data["kind"] = kind;
    ctx->saved_data["param"] = param;
    return at::full({}, loss, x.options());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    const at::Tensor &x = saved[0], &t = saved[1];
    const double param = ctx->saved_data["param"].toDouble();
    const float g = grads[0].item<float>();
    at::Tensor dx = at::empty_like(x);
    if (ctx->saved_data["kind"].toInt() == 0) {
      kernels::nll_loss_backward(x.size(0), x.size(1), t.data_ptr<std::int64_t>(),
                                 static_cast<std::int64_t>(param), g, ptr(dx));
    } else {
      kernels::cross_entropy_smoothed_backward(
          x.size(0), x.size(1), ptr(x), t.data_ptr<std::int64_t>(), static_cast<float>(param),
          ptr(saved[2]), ptr(saved[3]), g, ptr(dx));
    }
    return {dx, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

struct BceFn : torch::autograd::Function<BceFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, const at::Tensor& t_in) {
    const at::Tensor x = operand(x_in, "binary_cross_entropy_with_logits");
    const at::Tensor t = operand(t_in, "binary_cross_entropy_with_logits");
    TORCH_CHECK(x.sizes() == t.sizes(), "portable binary_cross_entropy_with_logits: ", x.sizes(),
                " vs ", t.sizes());
    const float loss = kernels::bce_with_logits(x.numel(), ptr(x), ptr(t));
    ctx->save_for_backward({x, t});
    return at::full({}, loss, x.options());
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto saved = ctx->get_saved_variables();
    at::Tensor dx = at::empty_like(saved[0]);
    kernels::bce_with_logits_backward(saved[0].numel(), ptr(saved[0]), ptr(saved[1]),
                                      grads[0].item<float>(), ptr(dx));
    return {dx, at::Tensor()};
  }
};

}  // namespace

at::Tensor group_norm(const at::Tensor& x, std::int64_t groups, const at::Tensor& w,
                      const at::Tensor& b, double eps) {
  return GroupNormFn::apply(x, optional_input(w), optional_input(b), groups, eps);
}

at::Tensor nll_loss(const at::Tensor& logp, const at::Tensor& target, std::int64_t ignore_index) {
  return ClassLossFn::apply(logp, target, 0, static_cast<double>(ignore_index));
}
at::Tensor cross_entropy_smoothed(const at::Tensor& logits, const at::Tensor& target, double eps) {
  return ClassLossFn::apply(logits, target, 1, eps);
}
at::Tensor bce_with_logits(const at::Tensor& x, const at::Tensor& target) {
  return BceFn::apply(x, target);
}

// --- recurrent layers ---------------------------------------------------------------------------

namespace {

struct RnnFn : torch::autograd::Function<RnnFn> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x_in,
                               const at::Tensor& h0_in, const at::Tensor& c0_in,
                               const at::Tensor& w_ih_in, const at::Tensor& w_hh_in,
                               const at::Tensor& b_ih_in, const at::Tensor& b_hh_in,
                               const at::Tensor& w_hr_in, std::int64_t cell, bool reverse) {
    const at::Tensor x = operand(x_in, "rnn"), h0 = operand(h0_in, "rnn");
    const at::Tensor w_ih = operand(w_ih_in, "rnn"), w_hh = operand(w_hh_in, "rnn");
    const bool lstm = static_cast<kernels::Cell>(cell) == kernels::Cell::kLstm;
    const at::Tensor c0 = lstm ? operand(c0_in, "rnn") : at::Tensor();
    const at::Tensor b_ih = b_ih_in.numel() > 0 ? operand(b_ih_in, "rnn") : at::Tensor();
    const at::Tensor b_hh = b_hh_in.numel() > 0 ? operand(b_hh_in, "rnn") : at::Tensor();
    const at::Tensor w_hr = w_hr_in.numel() > 0 ? operand(w_hr_in, "rnn") : at::Tensor();
    const kernels::RnnShape s = shape(x, h0, w_hr, cell, reverse);
    TORCH_CHECK(
        w_ih.size(0) == s.gate_rows() && w_ih.size(1) == s.input && w_hh.size(0) == s.gate_rows() &&
            w_hh.size(1) == s.width() && (!w_hr.defined() || (w_hr.size(0) == s.proj && lstm)) &&
            (!lstm || c0.numel() == s.batch * s.hidden),
        "portable rnn: weights ", w_ih.sizes(), " and ", w_hh.sizes(),
        w_hr.defined() ? c10::str(", projection ", w_hr.sizes()) : std::string(), " for input ",
        x.sizes(), ", state ", h0.sizes(), lstm ? c10::str(", cell ", c0.sizes()) : std::string());
    at::Tensor y = at::empty({s.steps, s.batch, s.width()}, x.options());
    at::Tensor hn = at::empty({s.batch, s.width()}, x.options());
    at::Tensor cn =
        lstm ? at::empty({s.batch, s.hidden}, x.options()) : at::empty({0}, x.options());
    at::Tensor saved = at::empty({s.saved_floats()}, x.options());
    kernels::rnn_forward(s, ptr(x), ptr(h0), lstm ? ptr(c0) : nullptr, ptr(w_ih), ptr(w_hh),
                         ptr_or_null(b_ih), ptr_or_null(b_hh), ptr(y), ptr(hn),
                         lstm ? ptr(cn) : nullptr, ptr(saved), ptr_or_null(w_hr));
    const at::Tensor none = at::empty({0}, x.options());
    ctx->save_for_backward(
        {x, h0, lstm ? c0 : none, w_ih, w_hh, y, saved, w_hr.defined() ? w_hr : none});
    ctx->saved_data["cell"] = cell;
    ctx->saved_data["reverse"] = reverse;
    ctx->saved_data["bias"] = b_ih.defined();
    return {y, hn, cn};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const auto v = ctx->get_saved_variables();
    const at::Tensor &x = v[0], &h0 = v[1], &c0 = v[2], &w_ih = v[3], &w_hh = v[4], &y = v[5];
    const std::int64_t cell = ctx->saved_data["cell"].toInt();
    const bool lstm = static_cast<kernels::Cell>(cell) == kernels::Cell::kLstm;
    const at::Tensor& w_hr = v[7];
    const kernels::RnnShape s = shape(x, h0, w_hr.numel() > 0 ? w_hr : at::Tensor(), cell,
                                      ctx->saved_data["reverse"].toBool());
    const at::Tensor dy = grads[0].contiguous(), dhn = grads[1].contiguous();
    const at::Tensor dcn = lstm ? grads[2].contiguous() : at::Tensor();
    at::Tensor dx = at::empty_like(x), dh0 = at::empty_like(h0);
    at::Tensor dc0 = lstm ? at::empty_like(c0) : at::Tensor();
    at::Tensor dw_ih = at::empty_like(w_ih), dw_hh = at::empty_like(w_hh), db_ih, db_hh, dw_hr;
    if (s.proj > 0) dw_hr = at::empty_like(w_hr);
    if (ctx->saved_data["bias"].toBool()) {
      db_ih = at::empty({s.gate_rows()}, x.options());
      db_hh = at::empty({s.gate_rows()}, x.options());
    }
    kernels::rnn_backward(s, ptr(x), ptr(h0), lstm ? ptr(c0) : nullptr, ptr(w_ih), ptr(w_hh),
                          ptr(y), ptr(v[6]), ptr(dy), ptr(dhn), lstm ? ptr(dcn) : nullptr, ptr(dx),
                          ptr(dh0), lstm ? ptr(dc0) : nullptr, ptr(dw_ih), ptr(dw_hh),
                          ptr_or_null(db_ih), ptr_or_null(db_hh), s.proj > 0 ? ptr(w_hr) : nullptr,
                          ptr_or_null(dw_hr));
    return {dx, dh0, dc0, dw_ih, dw_hh, db_ih, db_hh, dw_hr, at::Tensor(), at::Tensor()};
  }
  // h0 [B, width]; a projection's W_hr [P, H] gives H, else h0 does.
  static kernels::RnnShape shape(const at::Tensor& x, const at::Tensor& h0, const at::Tensor& w_hr,
                                 std::int64_t cell, bool reverse) {
    TORCH_CHECK(x.dim() == 3 && h0.dim() == 2 && h0.size(0) == x.size(1),
                "portable rnn: input [T, B, I] and state [B, H], got ", x.sizes(), " and ",
                h0.sizes());
    kernels::RnnShape s;
    s.cell = static_cast<kernels::Cell>(cell);
    s.steps = x.size(0), s.batch = x.size(1), s.input = x.size(2), s.hidden = h0.size(1);
    if (w_hr.defined()) {
      TORCH_CHECK(w_hr.dim() == 2, "portable rnn: a projection [P, H], got ", w_hr.sizes());
      s.proj = h0.size(1), s.hidden = w_hr.size(1);
    }
    s.reverse = reverse;
    return s;
  }
};

struct FeatureDropoutFn : torch::autograd::Function<FeatureDropoutFn> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x_in, double p,
                            std::int64_t state, std::int64_t call) {
    const at::Tensor x = operand(x_in, "feature_dropout");
    TORCH_CHECK(x.dim() >= 2, "portable feature_dropout: [B, C, ...] input, got ", x.sizes());
    at::Tensor y = at::empty_like(x);
    const std::int64_t batch = x.size(0), channels = x.size(1),
                       spatial = x.numel() / std::max<std::int64_t>(batch * channels, 1);
    kernels::feature_dropout(batch, channels, spatial, ptr(x), static_cast<float>(p),
                             static_cast<std::uint64_t>(state), static_cast<std::uint64_t>(call),
                             ptr(y));
    keep_draw(ctx, p, state, call);
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor dy = grads[0].contiguous();
    at::Tensor dx = at::empty_like(dy);
    const std::int64_t batch = dy.size(0), channels = dy.size(1),
                       spatial = dy.numel() / std::max<std::int64_t>(batch * channels, 1);
    const DropoutDraw draw = kept_draw(ctx);
    kernels::feature_dropout_backward(batch, channels, spatial, ptr(dy), draw.p, draw.state,
                                      draw.call, ptr(dx));
    return {dx, at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

}  // namespace

std::tuple<at::Tensor, at::Tensor, at::Tensor> rnn_layer(
    const at::Tensor& x, const at::Tensor& h0, const at::Tensor& c0, const at::Tensor& w_ih,
    const at::Tensor& w_hh, const at::Tensor& b_ih, const at::Tensor& b_hh, kernels::Cell cell,
    bool reverse, const at::Tensor& w_hr) {
  auto out = RnnFn::apply(x, h0, optional_input(c0), w_ih, w_hh, optional_input(b_ih),
                          optional_input(b_hh), optional_input(w_hr),
                          static_cast<std::int64_t>(cell), reverse);
  return {out[0], out[1], cell == kernels::Cell::kLstm ? out[2] : at::Tensor()};
}

at::Tensor feature_dropout(const at::Tensor& x, double p, std::uint64_t state, std::uint64_t call) {
  return FeatureDropoutFn::apply(x, p, static_cast<std::int64_t>(state),
                                 static_cast<std::int64_t>(call));
}

at::Tensor uniform(at::IntArrayRef shape, std::uint64_t state, std::uint64_t call) {
  at::Tensor y = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
  kernels::uniform(y.numel(), state, call, ptr(y));
  return y;
}

at::Tensor randint(std::int64_t low, std::int64_t high, at::IntArrayRef shape, std::uint64_t state,
                   std::uint64_t call) {
  at::Tensor y = at::empty(shape, at::TensorOptions().dtype(at::kLong));
  kernels::randint(y.numel(), low, high, state, call, y.data_ptr<std::int64_t>());
  return y;
}

at::Tensor normal(at::IntArrayRef shape, std::uint64_t state, std::uint64_t call) {
  at::Tensor y = at::empty(shape, at::TensorOptions().dtype(at::kFloat));
  kernels::normal(y.numel(), state, call, ptr(y));
  return y;
}

at::Tensor bernoulli_of(const at::Tensor& p_in, std::uint64_t state, std::uint64_t call) {
  const at::Tensor p = operand(p_in.detach(), "bernoulli");
  at::Tensor y = at::empty_like(p);
  kernels::bernoulli_of(p.numel(), ptr(p), state, call, ptr(y));
  return y;
}

at::Tensor bernoulli(const at::Tensor& like, double p, std::uint64_t state, std::uint64_t call) {
  at::Tensor y = at::empty(like.sizes(), like.options().dtype(at::kFloat));
  kernels::bernoulli(y.numel(), static_cast<float>(p), state, call, ptr(y));
  return y.to(like.scalar_type());
}

}  // namespace vt::training::portable
