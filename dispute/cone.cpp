#include "dispute/cone.h"

#include <algorithm>
#include <string_view>

#include "dispute/recompute_args.h"
#include "kernels/activation.h"

namespace vt::dispute {
namespace {

using referee::kMaxValues;
// A product's column is one span per value: past this many, the operator is ruled on whole
// operands (a hostile call's k must not make the referee list 2^28 spans).
constexpr std::int64_t kMaxColumn = std::int64_t{1} << 16;

std::optional<std::int64_t> int_param(const TracedCall& call, std::string_view name) {
  for (const TracedParam& p : call.params)
    if (p.name == name && !p.is_real) return p.integer;
  return std::nullopt;
}

std::optional<std::size_t> operand_named(const std::vector<OperandHash>& list,
                                         std::string_view name) {
  for (std::size_t i = 0; i < list.size(); ++i)
    if (list[i].name == name) return i;
  return std::nullopt;
}

// Operators whose every output value i reads value i of each input (absent inputs aside), with
// the call's parameters: a dropout's mask of value i comes from its stream and i alone.
bool elementwise(std::string_view op) {
  if (op == "bernoulli" || op == "bernoulli_of" || op == "uniform" || op == "normal" ||
      op == "sgd_update" || op == "adam_update" || op == "scale_gradient" || op == "ema_update")
    return true;
  constexpr std::string_view kBackward = "_backward";
  if (op.ends_with(kBackward)) op.remove_suffix(kBackward.size());
  if (op == "relu" || op == "gelu" || op == "dropout") return true;
  // Every activation of "More functions", by the name its kernel traces.
  return std::ranges::any_of(kernels::kActivations, [op](kernels::Activation f) {
    return kernels::activation_name(f) == op;
  });
}

// Operators whose output row r (of `width` values) reads row r of each input of rows·width
// values, every value of each input of `width` values (a layer norm's weight and bias), and
// writes one value per row to outputs of `rows` values (its mean and rstd).
bool row_wise(std::string_view op) {
  return op == "softmax" || op == "softmax_backward" || op == "log_softmax" ||
         op == "log_softmax_backward" || op == "layer_norm";
}

class Cone {
 public:
  explicit Cone(const TracedCall& call) : call_(call) {}
  // One span of input `name`; false when the call has no such operand or it is too short.
  bool input(std::string_view name, std::int64_t begin, std::int64_t end) {
    return add(false, name, begin, end);
  }
  bool output(std::string_view name, std::int64_t begin, std::int64_t end) {
    return add(true, name, begin, end);
  }
  // An optional input: nothing to add when the call records it absent.
  bool input_if_present(std::string_view name, std::int64_t begin, std::int64_t end) {
    const auto at = operand_named(call_.inputs, name);
    if (at && call_.inputs[*at].count == 0) return true;
    return input(name, begin, end);
  }
  std::vector<ValueSpan> spans;

 private:
  bool add(bool output, std::string_view name, std::int64_t begin, std::int64_t end) {
    const auto& list = output ? call_.outputs : call_.inputs;
    const auto at = operand_named(list, name);
    if (!at || begin < 0 || begin >= end || end > list[*at].count) return false;
    spans.push_back({output, *at, begin, end});
    return true;
  }
  const TracedCall& call_;
};

std::optional<std::vector<ValueSpan>> elementwise_cone(const TracedCall& call, std::int64_t index) {
  std::vector<ValueSpan> spans;
  const std::int64_t n = call.outputs.empty() ? 0 : call.outputs[0].count;
  for (std::size_t i = 0; i < call.inputs.size(); ++i) {
    if (call.inputs[i].count == 0) continue;
    if (call.inputs[i].count != n) return std::nullopt;
    spans.push_back({false, i, index, index + 1});
  }
  for (const OperandHash& o : call.outputs)
    if (o.count != 0 && o.count != n) return std::nullopt;
  return spans;
}

std::optional<std::vector<ValueSpan>> row_cone(const TracedCall& call, std::size_t output,
                                               std::int64_t index) {
  const auto rows = int_param(call, "rows"), width = int_param(call, "width");
  if (!rows || !width || *rows <= 0 || *width <= 0 || *rows > kMaxValues / *width)
    return std::nullopt;
  const std::int64_t out_count = call.outputs[output].count;
  // A row's values, or (a layer norm's mean and rstd) one value per row.
  const std::int64_t row = out_count == *rows ? index : index / *width;
  Cone cone(call);
  for (const OperandHash& in : call.inputs) {
    if (in.count == 0) continue;
    const bool ok = in.count == *width ? cone.input(in.name, 0, *width)
                                       : cone.input(in.name, row * *width, (row + 1) * *width);
    if (!ok) return std::nullopt;
  }
  return std::move(cone.spans);
}

std::optional<std::vector<ValueSpan>> gemm_cone(const TracedCall& call, std::int64_t index) {
  const auto batch = int_param(call, "batch"), m = int_param(call, "m"), n = int_param(call, "n"),
             k = int_param(call, "k"), accumulate = int_param(call, "accumulate");
  if (!batch || !m || !n || !k || !accumulate || *batch <= 0 || *m <= 0 || *n <= 0 || *k <= 0 ||
      *k > kMaxColumn || *m > kMaxValues / *n || *batch > kMaxValues / (*m * *n) ||
      *batch * *m > kMaxValues / *k || *batch * *k > kMaxValues / *n)
    return std::nullopt;
  const std::int64_t b = index / (*m * *n), i = index / *n % *m, j = index % *n;
  Cone cone(call);
  if (!cone.input("a", (b * *m + i) * *k, (b * *m + i + 1) * *k)) return std::nullopt;
  for (std::int64_t t = 0; t < *k; ++t)
    if (!cone.input("b", (b * *k + t) * *n + j, (b * *k + t) * *n + j + 1)) return std::nullopt;
  if (*accumulate != 0 && !cone.input("c", index, index + 1)) return std::nullopt;
  return std::move(cone.spans);
}

// A batch norm's channel c: its `spatial` values in each of the batch's samples.
bool channel(Cone& cone, std::int64_t batch, std::int64_t channels, std::int64_t spatial,
             std::int64_t c) {
  for (std::int64_t b = 0; b < batch; ++b)
    if (!cone.input("x", (b * channels + c) * spatial, (b * channels + c + 1) * spatial))
      return false;
  return true;
}

std::optional<std::vector<ValueSpan>> batch_norm_cone(const TracedCall& call, std::size_t output,
                                                      std::int64_t index) {
  const auto batch = int_param(call, "batch"), channels = int_param(call, "channels"),
             spatial = int_param(call, "spatial");
  if (!batch || !channels || !spatial || *batch <= 0 || *channels <= 0 || *spatial <= 0 ||
      *batch > kMaxValues / *channels || *batch * *channels > kMaxValues / *spatial)
    return std::nullopt;
  // y[i] reads x[i] only if both hold the B·C·S values the parameters say, in the same order.
  const auto count = [&](std::string_view name) {
    const auto at = operand_named(call.inputs, name);
    return at ? call.inputs[*at].count : -1;
  };
  const std::int64_t numel = *batch * *channels * *spatial;
  const auto y = operand_named(call.outputs, "y");
  if (count("x") != numel || !y || call.outputs[*y].count != numel) return std::nullopt;
  for (const OperandHash& o : call.outputs)
    if (o.name != "y" && o.count != 0 && o.count != *channels) return std::nullopt;
  const std::string& name = call.outputs[output].name;
  const bool per_value = name == "y";
  const std::int64_t c = per_value ? index / *spatial % *channels : index;
  Cone cone(call);
  bool ok = cone.input_if_present("weight", c, c + 1) && cone.input_if_present("bias", c, c + 1);
  if (call.op == "batch_norm_eval") {
    ok = ok && cone.input("x", index, index + 1) && cone.input("running_mean", c, c + 1) &&
         cone.input("running_var", c, c + 1);
  } else if (per_value) {
    ok = ok && cone.input("x", index, index + 1) && cone.output("mean", c, c + 1) &&
         cone.output("invstd", c, c + 1);
  } else {  // the channel's statistics, and the running ones that move toward them
    ok = channel(cone, *batch, *channels, *spatial, c) &&
         cone.input_if_present("running_mean", c, c + 1) &&
         cone.input_if_present("running_var", c, c + 1);
  }
  if (!ok) return std::nullopt;
  return std::move(cone.spans);
}

}  // namespace

bool computed_from_outputs(const TracedCall& call, std::size_t output) {
  return call.op == "batch_norm_train" && output < call.outputs.size() &&
         call.outputs[output].name == "y";
}

std::optional<std::vector<ValueSpan>> value_cone(const TracedCall& call, std::size_t output,
                                                 std::int64_t index) {
  if (output >= call.outputs.size() || index < 0 || index >= call.outputs[output].count)
    return std::nullopt;
  if (elementwise(call.op)) return elementwise_cone(call, index);
  if (row_wise(call.op)) return row_cone(call, output, index);
  if (call.op == "gemm") return gemm_cone(call, index);
  if (call.op == "batch_norm_train" || call.op == "batch_norm_eval")
    return batch_norm_cone(call, output, index);
  if (call.op == "add_bias") {
    const auto cols = int_param(call, "cols");
    if (!cols || *cols <= 0) return std::nullopt;
    Cone cone(call);
    if (!cone.input("y", index, index + 1) || !cone.input("bias", index % *cols, index % *cols + 1))
      return std::nullopt;
    return std::move(cone.spans);
  }
  return std::nullopt;
}

}  // namespace vt::dispute
