#pragma once
// The values one output value of a traced call is computed from (docs/dispute.md, "Evidence for
// one value"). Operator evidence may carry only those, with their chunks' proofs, and the referee
// rules on that one value; the table here says, operator by operator, what "those" are, so a
// referee never rules on a value whose inputs it was not shown.

#include <cstdint>
#include <optional>
#include <vector>

#include "dispute/step_trace.h"

namespace vt::dispute {

// Values [begin, end) of operand `operand` of the call's inputs, or of its outputs with `output`.
struct ValueSpan {
  bool output = false;
  std::size_t operand = 0;
  std::int64_t begin = 0, end = 0;
};

// What value `index` of output `output` of `call` reads: spans of the call's inputs, and for a
// batch norm's y the mean and invstd the same call output (y is computed from them: the referee
// does the same with the provider's signed ones, and rules on those separately when they are the
// values in dispute). Nothing when the operator is refereed on whole operands only, or the
// call's parameters do not fit its operands.
std::optional<std::vector<ValueSpan>> value_cone(const TracedCall& call, std::size_t output,
                                                 std::int64_t index);

// Whether value `index` of `output` is computed from the call's own outputs as value_cone says
// (batch_norm_train's y): the referee then computes it with kernels::batch_norm_value.
bool computed_from_outputs(const TracedCall& call, std::size_t output);

}  // namespace vt::dispute
