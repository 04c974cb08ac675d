#pragma once
// The referee's arithmetic: one traced operator call recomputed from its inputs by kernels/, the
// documented portable arithmetic (docs/portable.md), with nothing else of veritrain involved.
// Every size comes from the call's parameters and is checked against the operands before any
// kernel runs: the inputs come from a party to the dispute.

#include <vector>

#include "dispute/step_trace.h"

namespace vt::dispute {

// The operators the referee recomputes (docs/dispute.md lists them with their parameters).
const std::vector<std::string_view>& refereed_operators();

// The outputs `call` gives on `inputs`, named and ordered as call.outputs (an output the call
// records as absent stays absent). Invalid input: inputs or parameters that do not fit the
// operator, or an operator the referee does not know.
Result<std::vector<OperandValues>> recompute(const TracedCall& call,
                                             const std::vector<OperandValues>& inputs);

}  // namespace vt::dispute
