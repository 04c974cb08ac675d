#pragma once
// A dispute below the step (docs/dispute.md): the trace of one training step, replayed from the
// committed state the step's epoch starts from, and the operator evidence built from the
// provider's signed trace and its values of the disputed call. Portable tasks only: the trace
// compares operator by operator what the documented arithmetic makes bit-exact.

#include <optional>

#include "dispute/referee.h"
#include "protocol/task.h"
#include "training/trainer.h"

namespace vt::verifier {

struct TracedStep {
  dispute::StepTrace trace;
  std::optional<dispute::CallValues> values;  // of the call asked for
  // The operands' bytes the recorder hashed, and those it knew as values the step already hashed.
  std::size_t hashed_bytes = 0, repeated_bytes = 0;
};

// Replays epoch `epoch` from `start_state` (the committed state of epoch − 1) through step
// `step` and traces that step; with `capture`, keeps the values of that call too.
// `provider_code`, for tests' cheaters, is installed for every step and forwards to the recorder
// during the traced one.
Result<TracedStep> trace_step(const Task& task, ByteSpan start_state, std::uint64_t epoch,
                              std::int64_t step, const training::TrainerOptions& options,
                              std::optional<std::int64_t> capture = std::nullopt,
                              dispute::ForwardingSink* provider_code = nullptr);

// Where the provider's signed trace of (epoch, step) parts from the auditor's replay of it.
// Invalid input when the trace is for another task, epoch or step. The replay stops hashing at
// the first call that parts: `auditor` holds its calls up to and including that one (all of
// them when none parts, or when the provider's trace is only shorter).
struct StepComparison {
  dispute::StepTrace auditor;
  std::optional<dispute::Departure> departure;
};
Result<StepComparison> compare_step(const Task& task, ByteSpan start_state,
                                    const dispute::SignedTrace& provider,
                                    const training::TrainerOptions& options);

// The call's place in the step, in words: "backward pass, gelu_backward 2 of 4".
std::string place_of(const std::vector<dispute::TracedCall>& calls, std::int64_t index);

// The evidence for the referee from the provider's signed trace and its values of `call`
// (checked against the roots it signed: rejected when they are not those values). Where the
// operator allows it, the evidence gives one differing output value and the values it is computed
// from (dispute::narrow_to_one_value); else every operand whole.
// `records`: the provider's signed commitments of epochs E − 1 and E, carried in the evidence.
Result<dispute::OperatorEvidence> operator_evidence(const dispute::SignedTrace& provider,
                                                    const dispute::CallValues& values,
                                                    const Digest& auditor_calls_root,
                                                    std::vector<SignedRecord> records = {});

}  // namespace vt::verifier
