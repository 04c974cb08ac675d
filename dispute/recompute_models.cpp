#include <limits>
#include <string>

#include "dispute/recompute_args.h"
#include "kernels/loss.h"
#include "kernels/norm.h"
#include "kernels/pointwise.h"
#include "kernels/pool.h"
#include "kernels/products.h"
#include "kernels/reduce.h"
#include "kernels/rnn.h"
#include "kernels/upsample.h"

// The referee's recomputation of the operators of real models (docs/dispute.md, "Recorded
// operators"): as dispute/recompute.cpp, every size bounded before the kernel allocates.
namespace vt::dispute::referee {
namespace {

void feature_dropout(Args& a, bool backward) {
  const std::int64_t batch = a.integer("batch"), channels = a.integer("channels"),
                     spatial = a.integer("spatial");
  const std::int64_t n = values({batch, channels, spatial});
  const float p = a.real("p");
  if (!(p >= 0.0f && p < 1.0f)) throw Unfit{"parameter p is outside [0, 1)"};
  const std::uint64_t state = a.bits64("state"), call = a.bits64("call");
  if (backward) {
    kernels::feature_dropout_backward(batch, channels, spatial, a.in("dy", n), p, state, call,
                                      a.out("dx", n));
  } else {
    kernels::feature_dropout(batch, channels, spatial, a.in("x", n), p, state, call, a.out("y", n));
  }
}

// Window sizes, strides, padding and dilations of real models are small; bounding them (and the
// window positions a call visits) bounds the referee's work on a hostile call.
constexpr std::int64_t kMaxWindow = std::int64_t{1} << 16;

// The planes and their sizes in and out, each side's values bounded.
kernels::PoolShape plane_shape(Args& a) {
  kernels::PoolShape s;
  s.planes = a.integer("planes");
  s.in_h = a.integer("in_h", 1);
  s.in_w = a.integer("in_w", 1);
  s.out_h = a.integer("out_h", 1);
  s.out_w = a.integer("out_w", 1);
  values({s.planes, s.in_h, s.in_w});
  values({s.planes, s.out_h, s.out_w});
  return s;
}

kernels::PoolShape pool_shape(Args& a, bool windowed) {
  kernels::PoolShape s = plane_shape(a);
  s.kernel_h = a.integer("kernel_h", 1, kMaxWindow);
  s.kernel_w = a.integer("kernel_w", 1, kMaxWindow);
  s.stride_h = a.integer("stride_h", 1, kMaxWindow);
  s.stride_w = a.integer("stride_w", 1, kMaxWindow);
  s.pad_h = a.integer("pad_h", 0, kMaxWindow);
  s.pad_w = a.integer("pad_w", 0, kMaxWindow);
  s.dilation_h = a.integer("dilation_h", 1, kMaxWindow);
  s.dilation_w = a.integer("dilation_w", 1, kMaxWindow);
  if (windowed) {
    values({s.planes, s.out_h, s.out_w, s.kernel_h, s.kernel_w});
  } else {  // an adaptive window spans at most ⌈in / out⌉ + 1 positions each way
    values({s.planes, s.out_h, s.out_w, s.in_h / s.out_h + 2, s.in_w / s.out_w + 2});
  }
  return s;
}

void pool(Args& a, std::string_view op) {
  const bool adaptive = op.starts_with("adaptive_");
  const kernels::PoolShape s = pool_shape(a, !adaptive);
  const std::int64_t in = s.input_values(), out = s.output_values();
  kernels::AvgPoolOptions o;
  if (op.starts_with("avg_pool2d")) {
    o.count_include_pad = a.flag("count_include_pad");
    o.divisor_override = a.integer("divisor_override", 0, kMaxValues);
  }
  if (op == "max_pool2d") {
    kernels::max_pool2d(s, a.in("x", in), a.out("y", out), a.ids_out_or_none("argmax", out));
  } else if (op == "adaptive_max_pool2d") {
    kernels::adaptive_max_pool2d(s, a.in("x", in), a.out("y", out),
                                 a.ids_out_or_none("argmax", out));
  } else if (op == "max_pool2d_backward") {
    kernels::max_pool2d_backward(s, a.ids("argmax", out, s.in_h * s.in_w, -1), a.in("dy", out),
                                 a.out("dx", in));
  } else if (op == "avg_pool2d") {
    kernels::avg_pool2d(s, o, a.in("x", in), a.out("y", out));
  } else if (op == "avg_pool2d_backward") {
    kernels::avg_pool2d_backward(s, o, a.in("dy", out), a.out("dx", in));
  } else if (op == "adaptive_avg_pool2d") {
    kernels::adaptive_avg_pool2d(s, a.in("x", in), a.out("y", out));
  } else if (op == "adaptive_avg_pool2d_backward") {
    kernels::adaptive_avg_pool2d_backward(s, a.in("dy", out), a.out("dx", in));
  }
}

void upsample_bilinear(Args& a, bool backward) {
  const kernels::PoolShape s = plane_shape(a);
  const std::int64_t in = s.input_values(), out = s.output_values();
  const kernels::BilinearOptions o{a.flag("align_corners"), a.real("scale_h"), a.real("scale_w")};
  if (backward) {
    kernels::upsample_bilinear2d_backward(s, o, a.in("dy", out), a.out("dx", in));
  } else {
    kernels::upsample_bilinear2d(s, o, a.in("x", in), a.out("y", out));
  }
}

void upsample_nearest(Args& a, bool backward) {
  kernels::NearestShape s;
  s.planes = a.integer("planes");
  const char* dims[3] = {"d", "h", "w"};
  for (int d = 0; d < 3; ++d) {
    s.in[d] = a.integer(std::string("in_") + dims[d], 1);
    s.out[d] = a.integer(std::string("out_") + dims[d], 1);
    s.scale[d] = a.real(std::string("scale_") + dims[d]);
  }
  const std::int64_t in = values({s.planes, s.in[0], s.in[1], s.in[2]});
  const std::int64_t out = values({s.planes, s.out[0], s.out[1], s.out[2]});
  if (backward) {
    kernels::upsample_nearest_backward(s, a.in("dy", out), a.out("dx", in));
  } else {
    kernels::upsample_nearest(s, a.in("x", in), a.out("y", out));
  }
}

void group_norm(Args& a, bool backward) {
  const std::int64_t batch = a.integer("batch"), channels = a.integer("channels", 1),
                     spatial = a.integer("spatial", 1), groups = a.integer("groups", 1, channels);
  if (channels % groups != 0)
    throw Unfit{"parameter groups = " + std::to_string(groups) +
                " does not divide channels = " + std::to_string(channels)};
  const std::int64_t n = values({batch, channels, spatial}), rows = batch * groups;
  if (backward) {
    kernels::group_norm_backward(
        batch, channels, spatial, groups, a.in("x", n), a.in_or_none("weight", channels),
        a.in("mean", rows), a.in("rstd", rows), a.in("dy", n), a.out_or_none("dx", n),
        a.out_or_none("dweight", channels), a.out_or_none("dbias", channels));
    return;
  }
  kernels::group_norm(batch, channels, spatial, groups, a.in("x", n),
                      a.in_or_none("weight", channels), a.in_or_none("bias", channels),
                      a.real("eps"), a.out("y", n), a.out("mean", rows), a.out("rstd", rows));
}

void baddbmm(Args& a, bool backward) {
  const std::int64_t batch = a.integer("batch"), m = a.integer("m"), n = a.integer("n"),
                     k = a.integer("k");
  const std::int64_t na = values({batch, m, k}), nb = values({batch, k, n}),
                     ny = values({batch, m, n});
  values({batch, m, n, k});  // the products' work
  const float alpha = a.real("alpha"), beta = a.real("beta");
  if (backward) {
    kernels::baddbmm_backward(batch, m, n, k, a.in("a", na), a.in("b", nb), a.in("dy", ny), alpha,
                              beta, a.out_or_none("da", na), a.out_or_none("db", nb),
                              a.out_or_none("dc", ny));
    return;
  }
  kernels::baddbmm(batch, m, n, k, a.in("a", na), a.in("b", nb), a.in_or_none("c", ny), alpha, beta,
                   a.out("y", ny));
}

// One layer and direction of an LSTM (cell 0; proj where it has a projection), GRU (1) or Elman
// RNN (2 tanh, 3 ReLU), as kernels/rnn.h runs it.
void rnn(Args& a, bool backward) {
  kernels::RnnShape s;
  s.cell = static_cast<kernels::Cell>(a.integer("cell", 0, 3));
  s.steps = a.integer("steps", 1);
  s.batch = a.integer("batch", 1);
  s.input = a.integer("input", 1);
  s.hidden = a.integer("hidden", 1);
  s.reverse = a.flag("reverse");
  const bool lstm = s.cell == kernels::Cell::kLstm;
  s.proj = lstm ? a.integer_or("proj", 0, 1) : 0;
  const std::int64_t G = s.gate_rows(), W = s.width();
  values({s.steps, s.batch, G, s.input + W});    // the products' work
  values({s.steps, s.batch, G + 2 * s.hidden});  // what forward keeps, at most
  values({s.steps, s.batch, s.hidden, s.proj});  // the projection's work
  const std::int64_t state = s.batch * W, cell = s.batch * s.hidden,
                     xs = values({s.steps, s.batch, s.input}), ys = s.steps * state;
  const float* x = a.in("x", xs);
  const float* h0 = a.in("h0", state);
  const float* c0 = lstm ? a.in("c0", cell) : nullptr;
  const float* w_ih = a.in("w_ih", G * s.input);
  const float* w_hh = a.in("w_hh", G * W);
  const float* w_hr = s.proj > 0 ? a.in("w_hr", s.proj * s.hidden) : nullptr;
  if (!backward) {
    kernels::rnn_forward(s, x, h0, c0, w_ih, w_hh, a.in_or_none("b_ih", G), a.in_or_none("b_hh", G),
                         a.out("y", ys), a.out("hn", state),
                         lstm ? a.out_or_none("cn", cell) : nullptr,
                         a.out("saved", s.saved_floats()), w_hr);
    return;
  }
  kernels::rnn_backward(s, x, h0, c0, w_ih, w_hh, a.in("y", ys), a.in("saved", s.saved_floats()),
                        a.in("dy", ys), a.in_or_none("dhn", state),
                        lstm ? a.in_or_none("dcn", cell) : nullptr, a.out_or_none("dx", xs),
                        a.out_or_none("dh0", state), lstm ? a.out_or_none("dc0", cell) : nullptr,
                        a.out_or_none("dw_ih", G * s.input), a.out_or_none("dw_hh", G * W),
                        a.out_or_none("db_ih", G), a.out_or_none("db_hh", G), w_hr,
                        s.proj > 0 ? a.out_or_none("dw_hr", s.proj * s.hidden) : nullptr);
}

// The losses of "Losses, further forms"; g, the loss's gradient, is the parameter dloss.
void nll_loss(Args& a, bool backward) {
  const std::int64_t rows = a.integer("rows", 1), classes = a.integer("classes", 1);
  const std::int64_t ignore = a.integer("ignore_index", std::numeric_limits<std::int64_t>::min(),
                                        std::numeric_limits<std::int64_t>::max());
  const std::int64_t n = values({rows, classes});
  const std::int64_t* targets = a.targets(rows, classes, ignore);
  if (backward) {
    kernels::nll_loss_backward(rows, classes, targets, ignore, a.real("dloss"), a.out("dlogp", n));
    return;
  }
  *a.out("loss", 1) = kernels::nll_loss(rows, classes, a.in("logp", n), targets, ignore);
}

void cross_entropy_smoothed(Args& a, bool backward) {
  const std::int64_t rows = a.integer("rows", 1), classes = a.integer("classes", 1);
  const std::int64_t n = values({rows, classes});
  const float* logits = a.in("logits", n);
  const std::int64_t* targets = a.ids("targets", rows, classes);
  const float eps = a.real("eps");
  if (backward) {
    kernels::cross_entropy_smoothed_backward(rows, classes, logits, targets, eps,
                                             a.in("row_max", rows), a.in("row_sum", rows),
                                             a.real("dloss"), a.out("dlogits", n));
    return;
  }
  float* row_max = a.out("row_max", rows);
  float* row_sum = a.out("row_sum", rows);
  *a.out("loss", 1) =
      kernels::cross_entropy_smoothed(rows, classes, logits, targets, eps, row_max, row_sum);
}

void bce_with_logits(Args& a, bool backward) {
  const std::int64_t n = a.integer("n", 1);
  const float* x = a.in("x", n);
  const float* target = a.in("target", n);
  if (backward) {
    kernels::bce_with_logits_backward(n, x, target, a.real("dloss"), a.out("dx", n));
    return;
  }
  *a.out("loss", 1) = kernels::bce_with_logits(n, x, target);
}

// A reduction over the dimensions flagged reduced_d of an input of sizes size_d.
void reduce(Args& a, bool backward) {
  const auto r = static_cast<kernels::Reduction>(a.integer("kind", 0, 3));
  const std::int64_t rank = a.integer("rank", 0, 64);
  std::vector<std::int64_t> sizes;
  std::vector<bool> reduced;
  std::int64_t elements = 1, outputs = 1;
  for (std::int64_t d = 0; d < rank; ++d) {
    sizes.push_back(a.integer("size_" + std::to_string(d)));
    reduced.push_back(a.flag("reduced_" + std::to_string(d)));
    elements = values({elements, sizes.back()});
    if (!reduced.back()) outputs *= sizes.back();
  }
  // The operands first: the shape's tables of offsets are built only for operands that fit it.
  const bool reads_values =
      !backward || r == kernels::Reduction::kAmax || r == kernels::Reduction::kLogsumexp;
  const float* x = reads_values ? a.in("x", elements) : nullptr;
  const float* y = backward && reads_values ? a.in("y", outputs) : nullptr;
  const float* dy = backward ? a.in("dy", outputs) : nullptr;
  const kernels::ReduceShape s(sizes, reduced);
  if (backward) {
    kernels::reduce_backward(r, s, x, y, dy, a.out("dx", elements));
    return;
  }
  kernels::reduce(r, s, x, a.out("y", outputs));
}

}  // namespace

void add_model_operators(std::map<std::string_view, Recompute>& ops) {
  // An operator and its backward are one function with a flag.
  struct Pair {
    std::string_view forward, backward;
    void (*recompute)(Args&, bool);
  };
  for (const Pair& p :
       {Pair{"group_norm", "group_norm_backward", group_norm},
        Pair{"baddbmm", "baddbmm_backward", baddbmm}, Pair{"rnn", "rnn_backward", rnn},
        Pair{"feature_dropout", "feature_dropout_backward", feature_dropout},
        Pair{"nll_loss", "nll_loss_backward", nll_loss},
        Pair{"cross_entropy_smoothed", "cross_entropy_smoothed_backward", cross_entropy_smoothed},
        Pair{"bce_with_logits", "bce_with_logits_backward", bce_with_logits},
        Pair{"reduce", "reduce_backward", reduce},
        Pair{"upsample_bilinear2d", "upsample_bilinear2d_backward", upsample_bilinear},
        Pair{"upsample_nearest", "upsample_nearest_backward", upsample_nearest}}) {
    ops[p.forward] = [f = p.recompute](Args& a) { f(a, false); };
    ops[p.backward] = [f = p.recompute](Args& a) { f(a, true); };
  }
  ops["bernoulli"] = [](Args& a) {
    const std::int64_t n = a.integer("n", 0, (std::int64_t{1} << 40) - 1);
    kernels::bernoulli(n, a.real("p"), a.bits64("state"), a.bits64("call"), a.out("y", n));
  };
  ops["randint"] = [](Args& a) {
    const std::int64_t n = a.integer("n");
    const std::int64_t low = a.integer("low", std::numeric_limits<std::int64_t>::min(),
                                       std::numeric_limits<std::int64_t>::max() - 1);
    const std::int64_t high = a.integer("high", low + 1, std::numeric_limits<std::int64_t>::max());
    std::int64_t* y = a.ids_out_or_none("y", n);
    if (y != nullptr) kernels::randint(n, low, high, a.bits64("state"), a.bits64("call"), y);
  };
  ops["bernoulli_of"] = [](Args& a) {
    const std::int64_t n = a.integer("n");
    kernels::bernoulli_of(n, a.in("p", n), a.bits64("state"), a.bits64("call"), a.out("y", n));
  };
  ops["normal"] = [](Args& a) {
    const std::int64_t n = a.integer("n");
    kernels::normal(n, a.bits64("state"), a.bits64("call"), a.out("y", n));
  };
  ops["uniform"] = [](Args& a) {
    const std::int64_t n = a.integer("n", 0, (std::int64_t{1} << 40) - 1);
    kernels::uniform(n, a.bits64("state"), a.bits64("call"), a.out("y", n));
  };
  for (const std::string_view op :
       {"max_pool2d", "max_pool2d_backward", "avg_pool2d", "avg_pool2d_backward",
        "adaptive_avg_pool2d", "adaptive_avg_pool2d_backward", "adaptive_max_pool2d"})
    ops[op] = [op](Args& a) { pool(a, op); };
}

}  // namespace vt::dispute::referee
