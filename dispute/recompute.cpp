#include "dispute/recompute.h"

#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <set>

#include "kernels/activation.h"
#include "kernels/conv.h"
#include "kernels/gemm.h"
#include "kernels/loss.h"
#include "kernels/norm.h"
#include "kernels/optim.h"
#include "kernels/pointwise.h"
#include "kernels/pool.h"
#include "kernels/products.h"
#include "kernels/reduce.h"
#include "kernels/rnn.h"
#include "kernels/softmax.h"

namespace vt::dispute {
namespace {

// At most 2^28 values per operand (1 GiB of binary32): larger is not a step of any model the
// referee is meant for, and refusing it bounds what a hostile call can make it allocate.
constexpr std::int64_t kMaxValues = std::int64_t{1} << 28;

// What does not fit: thrown inside this file only, returned as invalid input by recompute().
struct Unfit {
  std::string message;
};

// The product of sizes, refused when it passes kMaxValues (so it never overflows).
std::int64_t values(std::initializer_list<std::int64_t> sizes) {
  std::int64_t total = 1;
  for (std::int64_t s : sizes) {
    if (s < 0 || (s > 0 && total > kMaxValues / s))
      throw Unfit{"the sizes give more than 2^28 values"};
    total *= s;
  }
  return total;
}

// One call's parameters and operands, checked as the operator's code asks for them; the outputs
// it creates, by name.
class Args {
 public:
  Args(const TracedCall& call, const std::vector<OperandValues>& inputs)
      : call_(call), inputs_(inputs) {}

  std::int64_t integer(std::string_view name, std::int64_t lo = 0, std::int64_t hi = kMaxValues) {
    const TracedParam& p = param(name, false);
    if (p.integer < lo || p.integer > hi)
      throw Unfit{"parameter " + std::string(name) + " = " + std::to_string(p.integer) +
                  " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]"};
    return p.integer;
  }
  bool flag(std::string_view name) { return integer(name, 0, 1) != 0; }
  std::uint64_t bits64(std::string_view name) {  // a 64-bit pattern (a random stream's state)
    return static_cast<std::uint64_t>(param(name, false).integer);
  }
  float real(std::string_view name) { return param(name, true).real; }

  const float* in(std::string_view name, std::int64_t count) {
    const float* p = in_or_none(name, count);
    if (p == nullptr && count > 0) throw Unfit{"input " + std::string(name) + " is absent"};
    return p;
  }
  const float* in_or_none(std::string_view name, std::int64_t count) {
    const OperandValues& v = input(name, DType::kF32);
    if (v.bytes.empty()) return nullptr;
    check_count(v, count);
    return reinterpret_cast<const float*>(v.bytes.data());
  }
  // Ids, each in [lo, bound) (a max pool's argmax may be −1: a window over padding alone).
  const std::int64_t* ids(std::string_view name, std::int64_t count, std::int64_t bound,
                          std::int64_t lo = 0) {
    const OperandValues& v = input(name, DType::kI64);
    check_count(v, count);
    const auto* p = reinterpret_cast<const std::int64_t*>(v.bytes.data());
    for (std::int64_t i = 0; i < count; ++i) {
      if (p[i] < lo || p[i] >= bound)
        throw Unfit{"input " + std::string(name) + "[" + std::to_string(i) +
                    "] = " + std::to_string(p[i]) + " is outside [" + std::to_string(lo) + ", " +
                    std::to_string(bound) + ")"};
    }
    return p;
  }
  // Class targets of a loss: each in [0, classes) or equal to ignore_index.
  const std::int64_t* targets(std::int64_t rows, std::int64_t classes, std::int64_t ignore_index) {
    const OperandValues& v = input("targets", DType::kI64);
    check_count(v, rows);
    const auto* p = reinterpret_cast<const std::int64_t*>(v.bytes.data());
    for (std::int64_t i = 0; i < rows; ++i) {
      if (p[i] != ignore_index && (p[i] < 0 || p[i] >= classes))
        throw Unfit{"input targets[" + std::to_string(i) + "] = " + std::to_string(p[i]) +
                    " is outside [0, " + std::to_string(classes) + ")"};
    }
    return p;
  }
  std::int64_t count_of(std::string_view name) {
    const OperandValues& v = input(name, DType::kF32);
    return static_cast<std::int64_t>(v.bytes.size() / sizeof(float));
  }

  // A fresh output of `count` values (+0.0 to start).
  float* out(std::string_view name, std::int64_t count) {
    Bytes& b = outputs_[std::string(name)];
    b.assign(static_cast<std::size_t>(count) * sizeof(float), 0);
    return reinterpret_cast<float*>(b.data());
  }
  // An output the call may leave absent: null when the trace records it absent.
  float* out_or_none(std::string_view name, std::int64_t count) {
    return traced_absent(name) ? nullptr : out(name, count);
  }
  // A fresh output of `count` ids (a max pool's argmax), or null when traced absent.
  std::int64_t* ids_out_or_none(std::string_view name, std::int64_t count) {
    if (traced_absent(name)) return nullptr;
    Bytes& b = outputs_[std::string(name)];
    b.assign(static_cast<std::size_t>(count) * sizeof(std::int64_t), 0);
    id_outputs_.insert(std::string(name));
    return reinterpret_cast<std::int64_t*>(b.data());
  }
  // An output that starts as the input of the same name (an update in place).
  float* in_out(std::string_view name, std::int64_t count) {
    const float* from = in(name, count);
    float* to = out(name, count);
    if (count > 0) std::memcpy(to, from, static_cast<std::size_t>(count) * sizeof(float));
    return to;
  }
  float* in_out_or_none(std::string_view name, std::int64_t count) {
    return in_or_none(name, count) == nullptr ? nullptr : in_out(name, count);
  }

  // The outputs in the trace's order; one the operator did not produce is absent.
  std::vector<OperandValues> results() {
    std::vector<OperandValues> out;
    for (const OperandHash& h : call_.outputs) {
      OperandValues v{h.name, id_outputs_.contains(h.name) ? DType::kI64 : DType::kF32, {}};
      if (auto it = outputs_.find(h.name); it != outputs_.end()) v.bytes = std::move(it->second);
      out.push_back(std::move(v));
    }
    return out;
  }

 private:
  const TracedParam& param(std::string_view name, bool real) {
    for (const TracedParam& p : call_.params) {
      if (p.name == name) {
        if (p.is_real != real)
          throw Unfit{"parameter " + std::string(name) + " should be " +
                      (real ? "a binary32 value" : "an integer")};
        return p;
      }
    }
    throw Unfit{"parameter " + std::string(name) + " is missing"};
  }
  const OperandValues& input(std::string_view name, DType dtype) {
    for (const OperandValues& v : inputs_) {
      if (v.name == name) {
        if (v.dtype != dtype)
          throw Unfit{"input " + std::string(name) + " should be " +
                      std::string(dtype_name(dtype))};
        return v;
      }
    }
    throw Unfit{"input " + std::string(name) + " is missing"};
  }
  static void check_count(const OperandValues& v, std::int64_t count) {
    const auto have = static_cast<std::int64_t>(v.bytes.size() / dtype_bytes(v.dtype));
    if (have != count)
      throw Unfit{"input " + v.name + " holds " + std::to_string(have) +
                  " values; the parameters " + "call for " + std::to_string(count)};
  }
  bool traced_absent(std::string_view name) const {
    for (const OperandHash& h : call_.outputs)
      if (h.name == name) return h.count == 0;
    return true;
  }

  const TracedCall& call_;
  const std::vector<OperandValues>& inputs_;
  std::map<std::string, Bytes> outputs_;
  std::set<std::string> id_outputs_;
};

using Recompute = std::function<void(Args&)>;

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

// Window sizes, strides, padding and dilations of real models are small; bounding them (and the
// window positions a call visits) bounds the referee's work on a hostile call.
constexpr std::int64_t kMaxWindow = std::int64_t{1} << 16;

kernels::PoolShape pool_shape(Args& a, bool windowed) {
  kernels::PoolShape s;
  s.planes = a.integer("planes");
  s.in_h = a.integer("in_h", 1);
  s.in_w = a.integer("in_w", 1);
  s.out_h = a.integer("out_h", 1);
  s.out_w = a.integer("out_w", 1);
  s.kernel_h = a.integer("kernel_h", 1, kMaxWindow);
  s.kernel_w = a.integer("kernel_w", 1, kMaxWindow);
  s.stride_h = a.integer("stride_h", 1, kMaxWindow);
  s.stride_w = a.integer("stride_w", 1, kMaxWindow);
  s.pad_h = a.integer("pad_h", 0, kMaxWindow);
  s.pad_w = a.integer("pad_w", 0, kMaxWindow);
  s.dilation_h = a.integer("dilation_h", 1, kMaxWindow);
  s.dilation_w = a.integer("dilation_w", 1, kMaxWindow);
  values({s.planes, s.in_h, s.in_w});
  values({s.planes, s.out_h, s.out_w});
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

// One layer and direction of an LSTM (cell 0) or GRU (cell 1), as kernels/rnn.h runs it.
void rnn(Args& a, bool backward) {
  kernels::RnnShape s;
  s.cell = a.integer("cell", 0, 1) == 0 ? kernels::Cell::kLstm : kernels::Cell::kGru;
  s.steps = a.integer("steps", 1);
  s.batch = a.integer("batch", 1);
  s.input = a.integer("input", 1);
  s.hidden = a.integer("hidden", 1);
  s.reverse = a.flag("reverse");
  const std::int64_t G = s.gate_rows();
  values({s.steps, s.batch, G, s.input + s.hidden});  // the products' work
  values({s.steps, s.batch, G + s.hidden});           // what forward keeps
  const bool lstm = s.cell == kernels::Cell::kLstm;
  const std::int64_t state = s.batch * s.hidden, xs = values({s.steps, s.batch, s.input}),
                     ys = s.steps * state;
  const float* x = a.in("x", xs);
  const float* h0 = a.in("h0", state);
  const float* c0 = lstm ? a.in("c0", state) : nullptr;
  const float* w_ih = a.in("w_ih", G * s.input);
  const float* w_hh = a.in("w_hh", G * s.hidden);
  if (!backward) {
    kernels::rnn_forward(s, x, h0, c0, w_ih, w_hh, a.in_or_none("b_ih", G), a.in_or_none("b_hh", G),
                         a.out("y", ys), a.out("hn", state),
                         lstm ? a.out_or_none("cn", state) : nullptr,
                         a.out("saved", s.saved_floats()));
    return;
  }
  kernels::rnn_backward(s, x, h0, c0, w_ih, w_hh, a.in("y", ys), a.in("saved", s.saved_floats()),
                        a.in("dy", ys), a.in_or_none("dhn", state),
                        lstm ? a.in_or_none("dcn", state) : nullptr, a.out_or_none("dx", xs),
                        a.out_or_none("dh0", state), lstm ? a.out_or_none("dc0", state) : nullptr,
                        a.out_or_none("dw_ih", G * s.input), a.out_or_none("dw_hh", G * s.hidden),
                        a.out_or_none("db_ih", G), a.out_or_none("db_hh", G));
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
      {"group_norm", [](Args& a) { group_norm(a, false); }},
      {"group_norm_backward", [](Args& a) { group_norm(a, true); }},
      {"baddbmm", [](Args& a) { baddbmm(a, false); }},
      {"baddbmm_backward", [](Args& a) { baddbmm(a, true); }},
      {"rnn", [](Args& a) { rnn(a, false); }},
      {"feature_dropout", [](Args& a) { feature_dropout(a, false); }},
      {"feature_dropout_backward", [](Args& a) { feature_dropout(a, true); }},
      {"bernoulli",
       [](Args& a) {
         const std::int64_t n = a.integer("n", 0, (std::int64_t{1} << 40) - 1);
         const float p = a.real("p");
         kernels::bernoulli(n, p, a.bits64("state"), a.bits64("call"), a.out("y", n));
       }},
      {"nll_loss", [](Args& a) { nll_loss(a, false); }},
      {"nll_loss_backward", [](Args& a) { nll_loss(a, true); }},
      {"cross_entropy_smoothed", [](Args& a) { cross_entropy_smoothed(a, false); }},
      {"cross_entropy_smoothed_backward", [](Args& a) { cross_entropy_smoothed(a, true); }},
      {"bce_with_logits", [](Args& a) { bce_with_logits(a, false); }},
      {"bce_with_logits_backward", [](Args& a) { bce_with_logits(a, true); }},
      {"reduce", [](Args& a) { reduce(a, false); }},
      {"reduce_backward", [](Args& a) { reduce(a, true); }},
      {"rnn_backward", [](Args& a) { rnn(a, true); }},
  };
  for (const std::string_view op :
       {"max_pool2d", "max_pool2d_backward", "avg_pool2d", "avg_pool2d_backward",
        "adaptive_avg_pool2d", "adaptive_avg_pool2d_backward", "adaptive_max_pool2d"})
    ops[op] = [op](Args& a) { pool(a, op); };
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
