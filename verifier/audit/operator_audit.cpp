#include "verifier/audit/operator_audit.h"

#include "dispute/evidence_values.h"
#include "verifier/check/epoch_check.h"

namespace vt::verifier {
namespace {

bool is_update(std::string_view op) { return op == "adam_update" || op == "sgd_update"; }
bool is_backward(std::string_view op) { return op.ends_with("_backward") || op == "column_sums"; }

}  // namespace

namespace {

// trace_step, and with `provider_calls` the recorder stops at the first call that is not the
// provider's (compare_step).
Result<TracedStep> trace(const Task& task, ByteSpan start_state, std::uint64_t epoch,
                         std::int64_t step, const training::TrainerOptions& options,
                         std::optional<std::int64_t> capture,
                         dispute::ForwardingSink* provider_code,
                         const std::vector<dispute::TracedCall>* provider_calls) {
  if (task.determinism != Determinism::kPortable)
    return invalid_input("a step trace is defined for portable tasks; this task's determinism is " +
                         name_string(task.determinism) + " (its disputes stay at the step: audit)");
  VT_ASSIGN_OR_RETURN(std::unique_ptr<training::Trainer> trainer,
                      restore_committed(task, start_state, options));
  if (static_cast<std::uint64_t>(trainer->epoch()) + 1 != epoch)
    return invalid_input("the start state is epoch " + std::to_string(trainer->epoch()) +
                         "; a trace of epoch " + std::to_string(epoch) + " starts from epoch " +
                         std::to_string(epoch - 1));
  if (step < 1 || step > trainer->steps_per_epoch())
    return invalid_input("--step " + std::to_string(step) + ": an epoch has steps 1.." +
                         std::to_string(trainer->steps_per_epoch()));
  dispute::TraceRecorder recorder(capture, /*background=*/true);
  recorder.compare_with(provider_calls);
  std::optional<dispute::ScopedSink> provider_scope;
  if (provider_code != nullptr) provider_scope.emplace(provider_code);
  std::optional<dispute::ScopedSink> recording;
  training::EpochHooks hooks;
  hooks.on_step_begin = [&](std::int64_t s) {
    if (s != step) return;
    if (provider_code != nullptr) {
      provider_code->set_next(&recorder);
    } else {
      recording.emplace(&recorder);
    }
  };
  hooks.on_step_end = [&](std::int64_t s) {
    if (s != step) return true;
    if (provider_code != nullptr) provider_code->set_next(nullptr);
    recording.reset();
    return false;
  };
  auto trained = trainer->train_epoch(hooks);
  // Compared with the provider's trace, the replay ends at the call that parts (dispute::StepCut:
  // an error out of train_epoch, and the trainer is left mid-step, which nothing reads again).
  if (!trained.ok() && !(provider_calls != nullptr && recorder.parted())) return trained.error();
  TracedStep out;
  out.trace.calls = recorder.take_calls();
  out.values = recorder.captured();
  out.hashed_bytes = recorder.hashed_bytes();
  out.repeated_bytes = recorder.repeated_bytes();
  if (capture && !out.values)
    return invalid_input("--call " + std::to_string(*capture) + ": step " + std::to_string(step) +
                         " makes " + std::to_string(out.trace.calls.size()) + " calls");
  out.trace.header = {task_id(task), epoch, step, static_cast<std::int64_t>(out.trace.calls.size()),
                      dispute::calls_root(out.trace.calls)};
  return out;
}

}  // namespace

Result<TracedStep> trace_step(const Task& task, ByteSpan start_state, std::uint64_t epoch,
                              std::int64_t step, const training::TrainerOptions& options,
                              std::optional<std::int64_t> capture,
                              dispute::ForwardingSink* provider_code) {
  return trace(task, start_state, epoch, step, options, capture, provider_code, nullptr);
}

Result<StepComparison> compare_step(const Task& task, ByteSpan start_state,
                                    const dispute::SignedTrace& provider,
                                    const training::TrainerOptions& options) {
  const dispute::TraceHeader& h = provider.trace.header;
  if (h.task_id != task_id(task))
    return invalid_input("the provider's trace is for task " + hex_encode(h.task_id) +
                         ", not this one (" + hex_encode(task_id(task)) + ")");
  VT_ASSIGN_OR_RETURN(TracedStep mine, trace(task, start_state, h.epoch, h.step, options,
                                             std::nullopt, nullptr, &provider.trace.calls));
  StepComparison out;
  out.departure = dispute::first_departure(mine.trace, provider.trace);
  // Whether the recorder saw the parting call while the step ran depends on how far its hashing
  // had come; the auditor's trace ends there either way, so its root is the same on every run.
  auto& calls = mine.trace.calls;
  const auto through = out.departure ? static_cast<std::size_t>(out.departure->call) + 1 : 0;
  if (out.departure && out.departure->kind != dispute::Departure::Kind::kLength &&
      calls.size() > through) {
    calls.resize(through);
    mine.trace.header.calls = static_cast<std::int64_t>(calls.size());
    mine.trace.header.calls_root = dispute::calls_root(calls);
  }
  out.auditor = std::move(mine.trace);
  return out;
}

std::string place_of(const std::vector<dispute::TracedCall>& calls, std::int64_t index) {
  if (index < 0 || index >= static_cast<std::int64_t>(calls.size())) return "";
  const std::string& op = calls[static_cast<std::size_t>(index)].op;
  std::int64_t nth = 0, of = 0;
  for (std::size_t i = 0; i < calls.size(); ++i) {
    if (calls[i].op != op) continue;
    ++of;
    if (static_cast<std::int64_t>(i) <= index) ++nth;
  }
  const std::string phase = is_update(op)     ? "optimizer update"
                            : is_backward(op) ? "backward pass"
                                              : "forward pass";
  return phase + ", " + op + " " + std::to_string(nth) + " of " + std::to_string(of) +
         " in the step";
}

Result<dispute::OperatorEvidence> operator_evidence(const dispute::SignedTrace& provider,
                                                    const dispute::CallValues& values,
                                                    const Digest& auditor_calls_root,
                                                    std::vector<SignedRecord> records) {
  const auto& calls = provider.trace.calls;
  if (values.index < 0 || values.index >= static_cast<std::int64_t>(calls.size()))
    return invalid_input("the provider's values are for call " + std::to_string(values.index) +
                         "; its trace has " + std::to_string(calls.size()) + " calls");
  const dispute::TracedCall& call = calls[static_cast<std::size_t>(values.index)];
  const std::string what = "the provider's values of call " + std::to_string(values.index);
  VT_RETURN_IF_ERROR(dispute::check_values(values.inputs, call.inputs, what + ": input"));
  VT_RETURN_IF_ERROR(dispute::check_values(values.outputs, call.outputs, what + ": output"));
  dispute::OperatorEvidence e;
  e.header = provider.trace.header;
  e.provider = provider.signer;
  e.provider_signature = provider.signature;
  e.call = call;
  e.proof = dispute::prove_call(calls, values.index);
  e.inputs = values.inputs;
  e.outputs = values.outputs;
  e.auditor_calls_root = auditor_calls_root;
  e.place = place_of(calls, values.index);
  e.records = std::move(records);
  // One disputed value and what it reads, where the operator allows it: kilobytes instead of
  // the call's whole operands (docs/dispute.md, "Evidence for one value").
  if (auto narrowed = dispute::narrow_to_one_value(e)) return std::move(*narrowed);
  return e;
}

}  // namespace vt::verifier
