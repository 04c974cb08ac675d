#pragma once
// Test-only providers that change one operator of a training step (docs/dispute.md, "Cheaters"):
// what a provider running other code than veritrain's arithmetic would compute. Each sits in
// the kernel-call stream as a sink (kernels/trace.h), rewrites the outputs of the first call of
// its operator after the documented kernel ran, and passes the call on to a recorder, so its
// trace shows what it computed.

#include <map>
#include <string>
#include <vector>

#include "dispute/step_trace.h"

namespace vt::adversary {

enum class OperatorCheat {
  kGeluTanh,             // GELU's tanh form instead of erf
  kSoftmaxWithoutMax,    // e^x / Σ e^x without subtracting the row's largest first
  kAdamEpsInsideSqrt,    // Adam's denominator √(v + ε) instead of √v + ε
  kSkippedWeightDecay,   // the optimizer update without its weight decay
  kDropoutOtherStream,   // a dropout mask from the next random stream
  kNormalOtherStream,    // torch.randn's normals from the next random stream
  kBatchNormSequential,  // a batch norm's sums as one chain, not in 16 lanes
  kCorruptedWeight,      // one weight one ulp off after the optimizer update
  kClippingSkipped,      // the gradient left as it was where the task clips it
  kAverageSkipped,       // the weights' moving average left as it was after the update
};

std::string cheat_name(OperatorCheat cheat);
// The operator each cheat changes, as the trace names it; for the optimizer cheats, `optimizer`
// is the task's update ("adam_update" or "sgd_update").
std::string cheated_operator(OperatorCheat cheat, const std::string& optimizer = "adam_update");

class OperatorCheater : public dispute::ForwardingSink {
 public:
  OperatorCheater(OperatorCheat cheat, const std::string& optimizer_op = "adam_update")
      : cheat_(cheat), target_(cheated_operator(cheat, optimizer_op)) {}
  void begin(std::string_view op, std::span<const kernels::trace::Param> params,
             std::span<const kernels::trace::Operand> inputs) override;
  void end(std::span<const kernels::trace::Operand> outputs) override;

  // Values the cheat changed (0: the cheat made no difference here).
  std::int64_t changed() const { return changed_; }

 private:
  OperatorCheat cheat_;
  std::string target_;
  bool current_ = false;  // the call under way is the one to change
  bool done_ = false;
  std::map<std::string, std::int64_t> ints_;
  std::map<std::string, float> reals_;
  std::map<std::string, std::vector<float>> in_;
  std::int64_t changed_ = 0;
};

}  // namespace vt::adversary
