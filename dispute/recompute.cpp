#include "dispute/recompute.h"

#include "dispute/recompute_args.h"
#include "kernels/activation.h"
#include "kernels/clip.h"
#include "kernels/conv.h"
#include "kernels/gemm.h"
#include "kernels/norm.h"
#include "kernels/optim.h"
#include "kernels/pointwise.h"
#include "kernels/softmax.h"

namespace vt::dispute {
namespace {

using namespace referee;

void elementwise(Args& a, std::string_view op) {
  const std::int64_t n = a.integer("n");
  if (op == "relu") kernels::relu(n, a.in("x", n), a.out("y", n));
  if (op == "gelu") kernels::gelu(n, a.in("x", n), a.out("y", n));
  if (op == "relu_backward") kernels::relu_backward(n, a.in("y", n), a.in("dy", n), a.out("dx", n));
  if (op == "gelu_backward") kernels::gelu_backward(n, a.in("x", n), a.in("dy", n), a.out("dx", n));
}

void dropout(Args& a, bool backward) {
  const std::int64_t n = a.integer("n", 0, (std::int64_t{1} << 40) - 1);
  const float p = a.real("p");
  if (!(p >= 0.0f && p < 1.0f)) throw Unfit{"parameter p is outside [0, 1)"};
  const std::uint64_t state = a.bits64("state"), call = a.bits64("call");
  if (backward) {
    kernels::dropout_backward(n, a.in("dy", n), p, state, call, a.out("dx", n));
  } else {
    kernels::dropout(n, a.in("x", n), p, state, call, a.out("y", n));
  }
}

void softmax(Args& a, bool backward) {
  const std::int64_t rows = a.integer("rows"), width = a.integer("width");
  const std::int64_t n = values({rows, width});
  const float divisor = a.real("divisor");
  const bool causal = a.flag("causal");
  if (backward) {
    kernels::softmax_backward(rows, width, a.in("y", n), a.in("dy", n), divisor, causal,
                              a.out("dx", n));
  } else {
    kernels::softmax(rows, width, a.in("x", n), divisor, causal, a.out("y", n));
  }
}

void cross_entropy(Args& a, bool backward) {
  const std::int64_t rows = a.integer("rows", 1), classes = a.integer("classes", 1);
  const std::int64_t n = values({rows, classes});
  const float* logits = a.in("logits", n);
  const std::int64_t* targets = a.ids("targets", rows, classes);
  if (backward) {
    kernels::cross_entropy_backward(rows, classes, logits, targets, a.in("row_max", rows),
                                    a.in("row_sum", rows), a.real("dloss"), a.out("dlogits", n));
    return;
  }
  float* row_max = a.out("row_max", rows);
  float* row_sum = a.out("row_sum", rows);
  *a.out("loss", 1) = kernels::cross_entropy(rows, classes, logits, targets, row_max, row_sum);
}

kernels::BatchNormShape bn_shape(Args& a) {
  kernels::BatchNormShape s;
  s.batch = a.integer("batch", 1);
  s.channels = a.integer("channels", 1);
  s.spatial = a.integer("spatial", 1);
  values({s.batch, s.channels, s.spatial});
  return s;
}

void batch_norm_train(Args& a) {
  const kernels::BatchNormShape s = bn_shape(a);
  if (s.batch * s.spatial < 2) throw Unfit{"a batch norm in training needs 2 values a channel"};
  const std::int64_t n = s.batch * s.channels * s.spatial, c = s.channels;
  const float* x = a.in("x", n);
  const float* weight = a.in_or_none("weight", c);
  const float* bias = a.in_or_none("bias", c);
  float* running_mean = a.in_out_or_none("running_mean", c);
  float* running_var = a.in_out_or_none("running_var", c);
  kernels::batch_norm_train(s, x, weight, bias, a.real("eps"), a.real("momentum"), running_mean,
                            running_var, a.out("y", n), a.out("mean", c), a.out("invstd", c),
                            a.flag("relu"));
}

void batch_norm_eval(Args& a) {
  const kernels::BatchNormShape s = bn_shape(a);
  const std::int64_t n = s.batch * s.channels * s.spatial, c = s.channels;
  kernels::batch_norm_eval(s, a.in("x", n), a.in_or_none("weight", c), a.in_or_none("bias", c),
                           a.in("running_mean", c), a.in("running_var", c), a.real("eps"),
                           a.out("y", n));
}

void batch_norm_backward(Args& a) {
  const kernels::BatchNormShape s = bn_shape(a);
  const std::int64_t n = s.batch * s.channels * s.spatial, c = s.channels;
  kernels::batch_norm_backward(s, a.in("x", n), a.in_or_none("weight", c), a.in("mean", c),
                               a.in("invstd", c), a.in("dy", n), a.out_or_none("dx", n),
                               a.out_or_none("dweight", c), a.out_or_none("dbias", c),
                               a.in_or_none("relu_y", n));
}

void layer_norm(Args& a, bool backward) {
  const std::int64_t rows = a.integer("rows"), width = a.integer("width", 1);
  const std::int64_t n = values({rows, width});
  if (backward) {
    kernels::layer_norm_backward(rows, width, a.in("x", n), a.in_or_none("weight", width),
                                 a.in("mean", rows), a.in("rstd", rows), a.in("dy", n),
                                 a.out_or_none("dx", n), a.out_or_none("dweight", width),
                                 a.out_or_none("dbias", width));
    return;
  }
  kernels::layer_norm(rows, width, a.in("x", n), a.in_or_none("weight", width),
                      a.in_or_none("bias", width), a.real("eps"), a.out("y", n),
                      a.out("mean", rows), a.out("rstd", rows));
}

void sgd_update(Args& a) {
  const std::int64_t n = a.integer("n");
  kernels::SgdStep s;
  s.lr = a.real("lr");
  s.momentum = a.real("momentum");
  s.weight_decay = a.real("weight_decay");
  s.nesterov = a.flag("nesterov");
  s.first = a.flag("first");
  const float* grad = a.in("grad", n);
  float* param = a.in_out("param", n);
  kernels::sgd_update(n, s, param, grad, a.in_out_or_none("buffer", n));
}

void adam_update(Args& a) {
  const std::int64_t n = a.integer("n");
  kernels::AdamStep s;
  s.lr = a.real("lr");
  s.lr_over_bias1 = a.real("lr_over_bias1");
  s.bias2_sqrt = a.real("bias2_sqrt");
  s.weight_decay = a.real("weight_decay");
  s.beta1 = a.real("beta1");
  s.beta2 = a.real("beta2");
  s.eps = a.real("eps");
  s.decoupled = a.flag("decoupled");
  const float* grad = a.in("grad", n);
  float* param = a.in_out("param", n);
  kernels::adam_update(n, s, param, grad, a.in_out("exp_avg", n), a.in_out("exp_avg_sq", n));
}

void gemm(Args& a) {
  const std::int64_t batch = a.integer("batch", 1), m = a.integer("m", 1), n = a.integer("n", 1),
                     k = a.integer("k");
  const bool accumulate = a.flag("accumulate");
  const std::int64_t mk = values({batch, m, k}), kn = values({batch, k, n}),
                     mn = values({batch, m, n});
  const float* lhs = a.in("a", mk);
  const float* rhs = a.in("b", kn);
  float* c = accumulate ? a.in_out("c", mn) : a.out("c", mn);
  kernels::gemm(batch, m, n, k, {lhs, k, 1, nullptr}, m * k, {rhs, n, 1, nullptr}, k * n, c, n,
                m * n, accumulate);
}

void column_sums(Args& a) {
  const std::int64_t rows = a.integer("rows"), cols = a.integer("cols", 1);
  kernels::column_sums(rows, cols, a.in("x", values({rows, cols})), cols, a.out("out", cols));
}

void embedding(Args& a, bool backward) {
  const std::int64_t count = a.integer("count"), width = a.integer("width", 1);
  const std::int64_t n = values({count, width});
  if (backward) {
    const std::int64_t rows = a.integer("rows", 1);
    kernels::embedding_backward(count, width, rows, a.ids("ids", count, rows), a.in("dy", n),
                                a.out("dtable", values({rows, width})));
    return;
  }
  const std::int64_t table_values = a.count_of("table");
  if (table_values % width != 0) throw Unfit{"input table is not a whole number of rows"};
  const std::int64_t rows = table_values / width;
  kernels::embedding(count, width, a.ids("ids", count, rows), a.in("table", table_values),
                     a.out("y", n));
}

kernels::ConvShape conv_shape(Args& a, std::int64_t& groups) {
  kernels::ConvShape s;
  s.batch = a.integer("batch", 1);
  s.in_channels = a.integer("in_channels", 1);
  s.out_channels = a.integer("out_channels", 1);
  groups = a.integer("groups", 1);
  if (s.in_channels % groups != 0 || s.out_channels % groups != 0)
    throw Unfit{"the channels do not split into the groups"};
  const char* axes[3] = {"d", "h", "w"};
  for (int d = 0; d < 3; ++d) {
    const std::string x = axes[d];
    s.in[d] = a.integer("in_" + x, 1);
    s.kernel[d] = a.integer("kernel_" + x, 1, 1 << 16);
    s.stride[d] = a.integer("stride_" + x, 1, 1 << 16);
    s.padding[d] = a.integer("padding_" + x, 0, 1 << 16);
    s.dilation[d] = a.integer("dilation_" + x, 1, 1 << 16);
    if (s.in[d] + 2 * s.padding[d] < s.dilation[d] * (s.kernel[d] - 1) + 1)
      throw Unfit{"the kernel does not fit the input along " + x};
  }
  values({s.batch, s.in_channels, s.in_positions()});
  values({s.batch, s.out_channels, s.out_positions()});
  values({s.out_channels, s.in_channels, s.taps()});
  return s;
}

void conv(Args& a, bool backward) {
  std::int64_t groups = 1;
  const kernels::ConvShape s = conv_shape(a, groups);
  const std::int64_t xn = s.batch * s.in_channels * s.in_positions();
  const std::int64_t yn = s.batch * s.out_channels * s.out_positions();
  const std::int64_t wn = s.out_channels * (s.in_channels / groups) * s.taps();
  if (backward) {
    const float* x = a.in_or_none("x", xn);
    float* dw = a.out_or_none("dw", wn);
    if (dw != nullptr && x == nullptr) throw Unfit{"a weight gradient needs the input x"};
    kernels::grouped_conv_backward(s, groups, x, a.in("w", wn), a.in("dy", yn),
                                   a.out_or_none("dx", xn), dw,
                                   a.out_or_none("dbias", s.out_channels));
    return;
  }
  kernels::grouped_conv_forward(s, groups, a.in("x", xn), a.in("w", wn),
                                a.in_or_none("bias", s.out_channels), a.out("y", yn));
}

// One of the element-wise activations (kernels/activation.h), forward or backward: its backward
// reads the output (sigmoid, tanh) or the input (the others), as the trace records it.
void activation(Args& a, kernels::Activation f, bool backward) {
  const std::int64_t n = a.integer("n");
  kernels::ActivationParams p;
  p.min_val = a.real("min_val");
  p.max_val = a.real("max_val");
  p.slope = a.real("slope");
  p.alpha = a.real("alpha");
  p.beta = a.real("beta");
  p.threshold = a.real("threshold");
  if (!backward) {
    kernels::activation(f, p, n, a.in("x", n), a.out("y", n));
    return;
  }
  const bool reads_output = kernels::backward_reads_output(f);
  kernels::activation_backward(f, p, n, reads_output ? nullptr : a.in("x", n),
                               reads_output ? a.in("y", n) : nullptr, a.in("dy", n),
                               a.out("dx", n));
}

std::map<std::string_view, Recompute> make_table();

const std::map<std::string_view, Recompute>& table() {
  static const std::map<std::string_view, Recompute> ops = make_table();
  return ops;
}

std::map<std::string_view, Recompute> make_table() {
  std::map<std::string_view, Recompute> ops = {
      {"add_bias",
       [](Args& a) {
         const std::int64_t rows = a.integer("rows"), cols = a.integer("cols", 1);
         const float* bias = a.in("bias", cols);
         kernels::add_bias(rows, cols, a.in_out("y", values({rows, cols})), bias);
       }},
      {"relu", [](Args& a) { elementwise(a, "relu"); }},
      {"relu_backward", [](Args& a) { elementwise(a, "relu_backward"); }},
      {"gelu", [](Args& a) { elementwise(a, "gelu"); }},
      {"gelu_backward", [](Args& a) { elementwise(a, "gelu_backward"); }},
      {"dropout", [](Args& a) { dropout(a, false); }},
      {"dropout_backward", [](Args& a) { dropout(a, true); }},
      {"row_mean",
       [](Args& a) {
         const std::int64_t rows = a.integer("rows"), width = a.integer("width", 1);
         kernels::row_mean(rows, width, a.in("x", values({rows, width})), a.out("y", rows));
       }},
      {"row_mean_backward",
       [](Args& a) {
         const std::int64_t rows = a.integer("rows"), width = a.integer("width", 1);
         kernels::row_mean_backward(rows, width, a.in("dy", rows),
                                    a.out("dx", values({rows, width})));
       }},
      {"mse",
       [](Args& a) {
         const std::int64_t n = a.integer("n", 1);
         *a.out("loss", 1) = kernels::mse(n, a.in("a", n), a.in("b", n));
       }},
      {"mse_backward",
       [](Args& a) {
         const std::int64_t n = a.integer("n", 1);
         kernels::mse_backward(n, a.in("a", n), a.in("b", n), a.real("dloss"), a.out("da", n));
       }},
      {"embedding", [](Args& a) { embedding(a, false); }},
      {"embedding_backward", [](Args& a) { embedding(a, true); }},
      {"softmax", [](Args& a) { softmax(a, false); }},
      {"softmax_backward", [](Args& a) { softmax(a, true); }},
      {"log_softmax",
       [](Args& a) {
         const std::int64_t rows = a.integer("rows"), width = a.integer("width", 1);
         const std::int64_t n = values({rows, width});
         kernels::log_softmax(rows, width, a.in("x", n), a.out("y", n));
       }},
      {"log_softmax_backward",
       [](Args& a) {
         const std::int64_t rows = a.integer("rows"), width = a.integer("width", 1);
         const std::int64_t n = values({rows, width});
         kernels::log_softmax_backward(rows, width, a.in("y", n), a.in("dy", n), a.out("dx", n));
       }},
      {"cross_entropy", [](Args& a) { cross_entropy(a, false); }},
      {"cross_entropy_backward", [](Args& a) { cross_entropy(a, true); }},
      {"batch_norm_train", batch_norm_train},
      {"batch_norm_backward", batch_norm_backward},
      {"batch_norm_eval", batch_norm_eval},
      {"layer_norm", [](Args& a) { layer_norm(a, false); }},
      {"layer_norm_backward", [](Args& a) { layer_norm(a, true); }},
      {"sgd_update", sgd_update},
      {"adam_update", adam_update},
      {"gemm", gemm},
      {"column_sums", column_sums},
      {"conv", [](Args& a) { conv(a, false); }},
      {"conv_backward", [](Args& a) { conv(a, true); }},
      // Gradient clipping (docs/portable.md, "Gradient clipping").
      {"sum_of_squares",
       [](Args& a) {
         const std::int64_t n = a.integer("n");
         *a.out("sum", 1) = kernels::sum_of_squares(n, a.in("x", n));
       }},
      {"abs_max",
       [](Args& a) {
         const std::int64_t n = a.integer("n");
         *a.out("max", 1) = kernels::abs_max(n, a.in("x", n));
       }},
      {"clip_coefficient",
       [](Args& a) {
         const std::int64_t count = a.integer("count");
         *a.out("coefficient", 1) = kernels::clip_coefficient(count, a.in("parts", count),
                                                              a.real("max_norm"), a.flag("inf"));
       }},
      {"scale_gradient",
       [](Args& a) {
         const std::int64_t n = a.integer("n");
         kernels::scale_gradient(n, a.in_out("x", n), a.real("c"));
       }},
      {"ema_update",
       [](Args& a) {
         const std::int64_t n = a.integer("n");
         const float* live = a.in("live", n);
         kernels::ema_update(n, a.in_out("average", n), live, a.real("decay"),
                             a.real("one_minus_decay"));
       }},
  };
  add_model_operators(ops);
  for (const kernels::Activation f : kernels::kActivations) {
    for (const bool backward : {false, true})
      ops[kernels::activation_name(f, backward)] = [f, backward](Args& a) {
        activation(a, f, backward);
      };
  }
  return ops;
}

}  // namespace

const std::vector<std::string_view>& refereed_operators() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> out;
    for (const auto& [name, run] : table()) out.push_back(name);
    return out;
  }();
  return names;
}

Result<std::vector<OperandValues>> recompute(const TracedCall& call,
                                             const std::vector<OperandValues>& inputs) {
  const auto it = table().find(call.op);
  if (it == table().end())
    return invalid_input(
        "operator \"" + call.op.substr(0, 64) +
        "\": the referee does not recompute it (docs/dispute.md lists those it does)");
  Args args(call, inputs);
  try {
    it->second(args);
  } catch (const Unfit& unfit) {
    return invalid_input("operator " + call.op + ": " + unfit.message);
  }
  return args.results();
}

}  // namespace vt::dispute
