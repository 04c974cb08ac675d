// `veritrain trace` and `veritrain dispute` (docs/dispute.md): a disputed step settled by one
// operator. The provider answers for its step with `trace` (its signed trace of the step, then
// its values of the one call in dispute); the auditor compares it with its own replay of the
// step with `dispute` and, once it has those values, writes operator evidence that
// `veritrain referee` rules on alone.
#include <filesystem>

#include "cli/app.h"
#include "cli/verifier_identity.h"
#include "common/file_io.h"
#include "verifier/audit/operator_audit.h"
#include "verifier/check/environment_check.h"

namespace vt::cli {
namespace {
namespace fs = std::filesystem;

// Traces and evidence carry operand values in hex: a large layer's are tens of megabytes.
constexpr std::uint64_t kMaxValuesFile = std::uint64_t{1} << 30;

struct TraceArgs {
  std::string task, workdir, key, out;
  std::uint64_t epoch = 0;
  std::int64_t step = 0, call = -1, threads = 0;
};

struct DisputeArgs {
  std::string task, workdir, key, provider_trace, provider_values, evidence;
  std::int64_t threads = 0;
};

training::TrainerOptions trainer_options(const std::string& task_file, std::int64_t threads) {
  training::TrainerOptions t;
  t.task_dir = fs::path(task_file).parent_path();
  t.intra_op_threads = threads;
  return t;
}

// The committed state the epoch starts from, and the records of the log.
struct WorkdirStart {
  Bytes state;
  std::vector<SignedRecord> records;
};
Result<WorkdirStart> start_state(const Task& task, const std::string& workdir,
                                 std::uint64_t epoch) {
  VT_ASSIGN_OR_RETURN(auto source, verifier::open_workdir_source(workdir));
  source->set_limits(verifier::limits_for(task));
  VT_RETURN_IF_ERROR(verifier::check_workdir_task(*source, task, workdir));
  WorkdirStart out;
  VT_ASSIGN_OR_RETURN(out.records, source->log());
  if (epoch == 0 || epoch >= out.records.size())
    return invalid_input("--epoch " + std::to_string(epoch) + ": the log commits epochs 0.." +
                         std::to_string(out.records.size() - 1) + "; a trace is of epochs 1.." +
                         std::to_string(out.records.size() - 1));
  VT_ASSIGN_OR_RETURN(
      out.state, source->snapshot(epoch - 1, out.records[epoch - 1].record.root, std::nullopt));
  return out;
}

Result<int> run_trace(Context& ctx, const TraceArgs& a) {
  VT_ASSIGN_OR_RETURN(Task task, load_task(a.task));
  const fs::path key_dir = a.key.empty() ? fs::path(a.workdir) / "keys" : fs::path(a.key);
  VT_ASSIGN_OR_RETURN(SigningKey key, SigningKey::load(KeyFiles::in(key_dir).signing_key));
  VT_ASSIGN_OR_RETURN(WorkdirStart start, start_state(task, a.workdir, a.epoch));
  std::optional<std::int64_t> capture;
  if (a.call >= 0) capture = a.call;
  VT_ASSIGN_OR_RETURN(verifier::TracedStep traced,
                      verifier::trace_step(task, start.state, a.epoch, a.step,
                                           trainer_options(a.task, a.threads), capture));
  const dispute::TraceHeader& h = traced.trace.header;
  if (traced.values) {
    VT_RETURN_IF_ERROR(write_file_atomic(a.out, dispute::write_call_values(h, *traced.values)));
    const dispute::TracedCall& call = traced.trace.calls[static_cast<std::size_t>(a.call)];
    emit(ctx,
         {{"epoch", a.epoch},
          {"step", a.step},
          {"call", a.call},
          {"operator", call.op},
          {"out", a.out}},
         "wrote the values of call " + std::to_string(a.call) + " (" + call.op + ") of step " +
             std::to_string(a.step) + " of epoch " + std::to_string(a.epoch) + " to " + a.out +
             "\n");
    return 0;
  }
  VT_RETURN_IF_ERROR(write_file_atomic(a.out, dispute::write_signed_trace(traced.trace, key)));
  emit(ctx,
       {{"epoch", a.epoch},
        {"step", a.step},
        {"calls", h.calls},
        {"calls_root", hex_encode(h.calls_root)},
        {"signer", key.public_key().fingerprint()},
        {"out", a.out}},
       "traced step " + std::to_string(a.step) + " of epoch " + std::to_string(a.epoch) + ": " +
           std::to_string(h.calls) + " operator calls, root " + hex_encode(h.calls_root) +
           ", signed by " + key.public_key().fingerprint() + "\nwrote " + a.out + "\n");
  return 0;
}

Result<int> run_dispute(Context& ctx, const DisputeArgs& a) {
  VT_ASSIGN_OR_RETURN(Task task, load_task(a.task));
  VT_RETURN_IF_ERROR(check_input_file(a.provider_trace, "--provider-trace"));
  VT_ASSIGN_OR_RETURN(std::string trace_text, read_text_file(a.provider_trace, kMaxValuesFile));
  VT_ASSIGN_OR_RETURN(dispute::SignedTrace provider,
                      dispute::read_signed_trace(trace_text, a.provider_trace));
  const dispute::TraceHeader& h = provider.trace.header;
  VT_ASSIGN_OR_RETURN(WorkdirStart start, start_state(task, a.workdir, h.epoch));
  // The trace answers for the provider's commitments only when the key that signed them signed it.
  if (provider.signer.raw() != start.records[h.epoch].record.signer)
    return rejected(a.provider_trace + ": signed by " + provider.signer.fingerprint() +
                    ", not by the key that signed the workdir's commitments");
  VT_ASSIGN_OR_RETURN(
      verifier::StepComparison cmp,
      verifier::compare_step(task, start.state, provider, trainer_options(a.task, a.threads)));
  const std::string step_words =
      "step " + std::to_string(h.step) + " of epoch " + std::to_string(h.epoch);
  nlohmann::json j = {{"epoch", h.epoch},
                      {"step", h.step},
                      {"calls", h.calls},
                      {"auditor_calls_root", hex_encode(cmp.auditor.header.calls_root)},
                      {"provider_calls_root", hex_encode(h.calls_root)}};
  if (!cmp.departure) {
    j["ok"] = true;
    j["result"] = "agrees";
    emit(ctx, j,
         "the provider's trace of " + step_words + " is the replay's, call for call (" +
             std::to_string(h.calls) + " calls): no operator is in dispute in this step\n");
    return 0;
  }
  const dispute::Departure& d = *cmp.departure;
  j["ok"] = false;
  j["result"] = std::string(dispute::departure_kind_name(d.kind));
  j["call"] = d.call;
  j["summary"] = d.description;
  if (d.kind != dispute::Departure::Kind::kOperator) {
    emit(ctx, j,
         step_words + ": " + d.description +
             "\nno single operator decides this; the step-level evidence of `veritrain audit` "
             "stands\n");
    return exit_code(Errc::kRejected);
  }
  j["place"] = verifier::place_of(provider.trace.calls, d.call);
  if (a.provider_values.empty()) {
    j["next"] = "veritrain trace --epoch " + std::to_string(h.epoch) + " --step " +
                std::to_string(h.step) + " --call " + std::to_string(d.call);
    emit(ctx, j,
         step_words + ": " + d.description + " (" + j["place"].get<std::string>() +
             ")\nask the provider for its values of that call (veritrain trace ... --epoch " +
             std::to_string(h.epoch) + " --step " + std::to_string(h.step) + " --call " +
             std::to_string(d.call) + "), then run dispute again with --provider-values\n");
    return exit_code(Errc::kRejected);
  }
  VT_RETURN_IF_ERROR(check_input_file(a.provider_values, "--provider-values"));
  VT_ASSIGN_OR_RETURN(std::string values_text, read_text_file(a.provider_values, kMaxValuesFile));
  VT_ASSIGN_OR_RETURN(dispute::CallValues values,
                      dispute::read_call_values(values_text, a.provider_values, h));
  if (values.index != d.call)
    return invalid_input(a.provider_values + ": the values of call " +
                         std::to_string(values.index) + "; the disputed call is " +
                         std::to_string(d.call));
  VT_ASSIGN_OR_RETURN(dispute::OperatorEvidence evidence,
                      verifier::operator_evidence(provider, values, cmp.auditor.header.calls_root));
  VT_ASSIGN_OR_RETURN(dispute::Ruling ruling, dispute::rule(evidence));
  j["ruling"] = dispute::ruling_to_json(ruling, evidence);
  std::string written;
  if (!a.evidence.empty()) {
    VT_ASSIGN_OR_RETURN(SigningKey key, verifier_key(a.key));
    VT_RETURN_IF_ERROR(
        write_file_atomic(a.evidence, dispute::write_operator_evidence(evidence, key)));
    j["evidence"] = a.evidence;
    written = "evidence: " + a.evidence + " (veritrain referee " + a.evidence + ")\n";
  }
  j["ok"] = ruling.provider_correct;
  emit(ctx, j, step_words + ": " + d.description + "\nruling " + ruling.summary + "\n" + written);
  return ruling.provider_correct ? 0 : exit_code(Errc::kRejected);
}

}  // namespace

void register_dispute(CLI::App& app, Context& ctx) {
  auto t = std::make_shared<TraceArgs>();
  auto* trace = app.add_subcommand("trace", summary_of("trace"));
  trace->add_option("--task", t->task, "task.json")->required();
  trace->add_option("--workdir", t->workdir, "The provider's workdir")->required();
  trace->add_option("--epoch", t->epoch, "The epoch of the step")->required();
  trace->add_option("--step", t->step, "The step, 1-based within the epoch")->required();
  trace->add_option("--call", t->call,
                    "Write this call's operand values instead of the signed trace");
  trace->add_option("--out", t->out, "Where to write the trace (or the values)")->required();
  trace->add_option("--key", t->key, "Key folder; default: the workdir's own keys");
  trace->add_option("--threads", t->threads, "Replay with this intra-op thread count")
      ->check(CLI::Range(1, 4096));
  trace->callback([&ctx, t] { ctx.action = [&ctx, t] { return run_trace(ctx, *t); }; });

  auto d = std::make_shared<DisputeArgs>();
  auto* dispute = app.add_subcommand("dispute", summary_of("dispute"));
  dispute->add_option("--task", d->task, "task.json")->required();
  dispute->add_option("--workdir", d->workdir, "The provider's workdir (or a copy)")->required();
  dispute
      ->add_option("--provider-trace", d->provider_trace,
                   "The provider's signed trace of the disputed step (veritrain trace)")
      ->required();
  dispute->add_option("--provider-values", d->provider_values,
                      "The provider's values of the disputed call (veritrain trace --call)");
  dispute->add_option("--evidence", d->evidence, "Write signed operator evidence here");
  dispute->add_option("--key", d->key,
                      "Auditor key folder; default: $XDG_CONFIG_HOME/veritrain/verifier");
  dispute->add_option("--threads", d->threads, "Replay with this intra-op thread count")
      ->check(CLI::Range(1, 4096));
  dispute->callback([&ctx, d] { ctx.action = [&ctx, d] { return run_dispute(ctx, *d); }; });
}

}  // namespace vt::cli
