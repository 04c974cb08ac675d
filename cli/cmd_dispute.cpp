// `veritrain trace` and `veritrain dispute` (docs/dispute.md): a disputed step settled by one
// operator. The provider answers for its step with `trace` (its signed trace of the step, then
// its values of the one call in dispute); the auditor compares it with its own replay of the
// step with `dispute` and, once it has those values, writes operator evidence that
// `veritrain referee` rules on alone.
#include <filesystem>

#include "cli/app.h"
#include "cli/source_args.h"
#include "cli/verifier_identity.h"
#include "common/file_io.h"
#include "verifier/audit/audit.h"
#include "verifier/audit/operator_audit.h"
#include "verifier/audit/ruling_page.h"

namespace vt::cli {
namespace {
namespace fs = std::filesystem;

struct TraceArgs {
  std::string task, workdir, key, out;
  std::uint64_t epoch = 0;
  std::int64_t step = 0, call = -1, threads = 0;
};

struct DisputeArgs {
  SourceArgs source;
  std::string task, key, provider_trace, provider_values, evidence, report;
  std::uint64_t epoch = 0, step = 0;
  std::int64_t threads = 0;
  double evidence_timeout = 600;
};

training::TrainerOptions trainer_options(const std::string& task_file, std::int64_t threads) {
  training::TrainerOptions t;
  t.task_dir = fs::path(task_file).parent_path();
  t.intra_op_threads = threads;
  return t;
}

// The committed state the epoch starts from, and the records of the log (checked: signed,
// chained, of this task).
struct EpochStart {
  Bytes state;
  std::vector<SignedRecord> records;
};
Result<EpochStart> start_state(const Task& task, verifier::EvidenceSource& source,
                               std::uint64_t epoch) {
  source.set_limits(verifier::limits_for(task));
  EpochStart out;
  VT_ASSIGN_OR_RETURN(out.records, source.log());
  if (auto checked = verify_log(out.records, task_id(task)); !checked)
    return rejected(checked.error().message);
  if (epoch == 0 || epoch >= out.records.size())
    return invalid_input("--epoch " + std::to_string(epoch) + ": the log commits epochs 0.." +
                         std::to_string(out.records.size() - 1) +
                         "; a step trace is of epochs 1.." +
                         std::to_string(out.records.size() - 1));
  VT_ASSIGN_OR_RETURN(out.state,
                      source.snapshot(epoch - 1, out.records[epoch - 1].record.root, std::nullopt));
  return out;
}

Result<EpochStart> workdir_start(const Task& task, const std::string& workdir,
                                 std::uint64_t epoch) {
  VT_ASSIGN_OR_RETURN(auto source, verifier::open_workdir_source(workdir));
  VT_RETURN_IF_ERROR(verifier::check_workdir_task(*source, task, workdir));
  return start_state(task, *source, epoch);
}

Result<int> run_trace(Context& ctx, const TraceArgs& a) {
  VT_ASSIGN_OR_RETURN(Task task, load_task(a.task));
  const fs::path key_dir = a.key.empty() ? fs::path(a.workdir) / "keys" : fs::path(a.key);
  VT_ASSIGN_OR_RETURN(SigningKey key, SigningKey::load(KeyFiles::in(key_dir).signing_key));
  VT_ASSIGN_OR_RETURN(EpochStart start, workdir_start(task, a.workdir, a.epoch));
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

// One step's dispute: the provider's signed trace against this machine's replay, and with its
// values of the disputed call, the ruling. `values_for(call)` gets those values (from a file or
// from the provider), or nothing when they are not at hand yet.
struct StepDispute {
  int exit = 0;
  bool departs = false;
};
Result<StepDispute> dispute_step(
    Context& ctx, const DisputeArgs& a, const Task& task, const EpochStart& start,
    const dispute::SignedTrace& provider,
    const std::function<Result<std::optional<dispute::CallValues>>(std::int64_t call)>&
        values_for) {
  const dispute::TraceHeader& h = provider.trace.header;
  // The trace answers for the provider's commitments only when the key that signed them signed it.
  if (provider.signer.raw() != start.records[h.epoch].record.signer)
    return rejected("the trace of step " + std::to_string(h.step) + " is signed by " +
                    provider.signer.fingerprint() +
                    ", not by the key that signed the provider's commitments");
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
    return StepDispute{0, false};
  }
  const dispute::Departure& d = *cmp.departure;
  j["ok"] = false;
  j["result"] = std::string(dispute::departure_kind_name(d.kind));
  j["call"] = d.call;
  j["summary"] = d.description;
  if (d.kind != dispute::Departure::Kind::kOperator) {
    // Nothing recomputes one call here: the auditor's replay alone locates the departure, so it
    // stands only if a second replay of the step agrees with the first (an operator departure
    // needs no such check: the referee rules on the provider's own values of the call).
    VT_ASSIGN_OR_RETURN(
        verifier::StepComparison again,
        verifier::compare_step(task, start.state, provider, trainer_options(a.task, a.threads)));
    if (again.auditor.header.calls_root != cmp.auditor.header.calls_root) {
      j["result"] = "inconclusive";
      j["summary"] = "two replays of " + step_words +
                     " here differ from each other: the task's arithmetic does not reproduce on "
                     "this machine, so neither is evidence against the provider";
      emit(ctx, j, j["summary"].get<std::string>() + "\n");
      return StepDispute{kExitInconclusive, true};
    }
    emit(ctx, j,
         step_words + ": " + d.description +
             "\nno single operator decides this; the step-level evidence of `veritrain audit` "
             "stands\n");
    return StepDispute{exit_code(Errc::kRejected), true};
  }
  j["operator"] = provider.trace.calls[static_cast<std::size_t>(d.call)].op;
  j["place"] = verifier::place_of(provider.trace.calls, d.call);
  auto asked = values_for(d.call);
  if (!asked.ok() && asked.error().code == Errc::kRejected) {
    // The operator is found; the provider does not back its own trace with the values.
    j["result"] = "withheld";
    j["summary"] = d.description + "; " + asked.error().message;
    emit(ctx, j,
         step_words + ": " + d.description + " (" + j["place"].get<std::string>() +
             ")\nthe provider does not answer for that call: " + asked.error().message + "\n");
    return StepDispute{exit_code(Errc::kRejected), true};
  }
  VT_ASSIGN_OR_RETURN(std::optional<dispute::CallValues> values, std::move(asked));
  if (!values) {
    j["next"] = "veritrain trace --epoch " + std::to_string(h.epoch) + " --step " +
                std::to_string(h.step) + " --call " + std::to_string(d.call);
    emit(ctx, j,
         step_words + ": " + d.description + " (" + j["place"].get<std::string>() +
             ")\nask the provider for its values of that call (veritrain trace ... --epoch " +
             std::to_string(h.epoch) + " --step " + std::to_string(h.step) + " --call " +
             std::to_string(d.call) + "), then run dispute again with --provider-values\n");
    return StepDispute{exit_code(Errc::kRejected), true};
  }
  if (values->index != d.call)
    return invalid_input("the provider's values are of call " + std::to_string(values->index) +
                         "; the disputed call is " + std::to_string(d.call));
  VT_ASSIGN_OR_RETURN(
      dispute::OperatorEvidence evidence,
      verifier::operator_evidence(provider, *values, cmp.auditor.header.calls_root,
                                  {start.records[h.epoch - 1], start.records[h.epoch]}));
  VT_ASSIGN_OR_RETURN(dispute::Ruling ruling, dispute::rule(evidence));
  j["ruling"] = dispute::ruling_to_json(ruling, evidence);
  std::string written, auditor_key = "(no evidence signed: give --evidence)";
  if (!a.evidence.empty()) {
    VT_ASSIGN_OR_RETURN(SigningKey key, verifier_key(a.key));
    auditor_key = key.public_key().fingerprint();
    VT_RETURN_IF_ERROR(
        write_file_atomic(a.evidence, dispute::write_operator_evidence(evidence, key)));
    j["evidence"] = a.evidence;
    written = "evidence: " + a.evidence + " (veritrain referee " + a.evidence + ")\n";
  }
  if (!a.report.empty()) {
    VT_RETURN_IF_ERROR(verifier::write_ruling_page(
        a.report, ruling, evidence, {a.evidence.empty() ? "EVIDENCE" : a.evidence, auditor_key}));
    j["report"] = (fs::path(a.report) / "report.html").string();
    written += "report: " + j["report"].get<std::string>() + "\n";
  }
  j["ok"] = ruling.provider_correct;
  emit(ctx, j, step_words + ": " + d.description + "\nruling " + ruling.summary + "\n" + written);
  return StepDispute{ruling.provider_correct ? 0 : exit_code(Errc::kRejected), true};
}

// What the provider answered, read: a malformed answer is the provider's failure (rejected), not
// a usage error of the auditor's.
template <typename T>
Result<T> provider_answer(Result<T> read) {
  if (!read.ok() && read.error().code == Errc::kInvalidInput)
    return rejected("the provider's answer is malformed: " + read.error().message);
  return read;
}

Result<dispute::SignedTrace> read_trace(ByteSpan text, const std::string& where, const Task& task) {
  VT_ASSIGN_OR_RETURN(
      dispute::SignedTrace trace,
      provider_answer(dispute::read_signed_trace(
          std::string_view(reinterpret_cast<const char*>(text.data()), text.size()), where)));
  if (trace.trace.header.task_id != task_id(task))
    return rejected(where + ": a trace of task " + hex_encode(trace.trace.header.task_id) +
                    ", not of this one (" + hex_encode(task_id(task)) + ")");
  return trace;
}

// Offline: the provider's answers are files it wrote with `veritrain trace`.
Result<int> dispute_from_files(Context& ctx, const DisputeArgs& a, const Task& task) {
  VT_RETURN_IF_ERROR(check_input_file(a.provider_trace, "--provider-trace"));
  VT_ASSIGN_OR_RETURN(std::string text, read_text_file(a.provider_trace, dispute::kMaxTraceText));
  VT_ASSIGN_OR_RETURN(dispute::SignedTrace provider,
                      read_trace(as_bytes(text), a.provider_trace, task));
  VT_ASSIGN_OR_RETURN(EpochStart start,
                      workdir_start(task, a.source.workdir, provider.trace.header.epoch));
  auto values_for = [&](std::int64_t) -> Result<std::optional<dispute::CallValues>> {
    if (a.provider_values.empty()) return std::optional<dispute::CallValues>();
    VT_RETURN_IF_ERROR(check_input_file(a.provider_values, "--provider-values"));
    VT_ASSIGN_OR_RETURN(std::string v, read_text_file(a.provider_values, dispute::kMaxValuesText));
    VT_ASSIGN_OR_RETURN(
        dispute::CallValues values,
        provider_answer(dispute::read_call_values(v, a.provider_values, provider.trace.header)));
    return std::optional(std::move(values));
  };
  VT_ASSIGN_OR_RETURN(StepDispute d, dispute_step(ctx, a, task, start, provider, values_for));
  return d.exit;
}

// The steps to ask about: --step, or those between the last trail point the replay matched and
// the first it did not (audit's finding), in order. None, with the exit to end on, when the audit
// leaves no step to dispute.
struct DisputedSteps {
  std::vector<std::uint64_t> steps;
  int exit = 0;
};
Result<DisputedSteps> disputed_steps(Context& ctx, const DisputeArgs& a, const Task& task,
                                     verifier::EvidenceSource& source) {
  if (a.step > 0) return DisputedSteps{{a.step}, 0};
  std::error_code ec;  // the audit's second replay runs in a fresh process of this binary
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  VT_ASSIGN_OR_RETURN(
      verifier::AuditFinding f,
      verifier::audit_epoch(source, task, a.epoch, trainer_options(a.task, a.threads), self));
  if (!f.irreproducible.empty() && f.stored_state_problem.empty()) {
    emit(ctx,
         {{"ok", false}, {"epoch", a.epoch}, {"result", "inconclusive"}, {"summary", f.summary}},
         f.summary +
             "\nno step to dispute: this machine does not replay the epoch the same "
             "way twice\n");
    return DisputedSteps{{}, kExitInconclusive};
  }
  if (!f.start_state_problem.empty() || f.bit_identical || !f.irreproducible.empty()) {
    const bool sound = f.bit_identical && f.stored_state_problem.empty();
    emit(ctx,
         {{"ok", sound}, {"epoch", a.epoch}, {"result", "no_step_dispute"}, {"summary", f.summary}},
         f.summary + "\n" +
             (f.bit_identical ? "nothing to dispute below the step\n"
                              : "no step to dispute: `veritrain audit` says why\n"));
    return DisputedSteps{{}, 0};
  }
  const auto first = static_cast<std::uint64_t>(f.last_matching_step.value_or(0)) + 1;
  const auto last = static_cast<std::uint64_t>(f.first_diverging_step.value_or(f.steps));
  DisputedSteps out;
  for (std::uint64_t s = first; s <= last; ++s) out.steps.push_back(s);
  return out;
}

Result<int> run_dispute(Context& ctx, const DisputeArgs& a) {
  VT_ASSIGN_OR_RETURN(Task task, load_task(a.task));
  if (!a.provider_trace.empty()) {
    if (a.source.workdir.empty())
      return invalid_input(
          "--provider-trace: give the provider's workdir (--workdir) it answers for");
    return dispute_from_files(ctx, a, task);
  }
  if (a.epoch == 0) return invalid_input("dispute needs --epoch E, or --provider-trace FILE");
  const auto timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(a.evidence_timeout * 1000));
  VT_ASSIGN_OR_RETURN(auto source, open_source(a.source, timeout));
  if (!a.source.workdir.empty())
    VT_RETURN_IF_ERROR(verifier::check_workdir_task(*source, task, a.source.workdir));
  VT_ASSIGN_OR_RETURN(EpochStart start, start_state(task, *source, a.epoch));
  VT_ASSIGN_OR_RETURN(DisputedSteps disputed, disputed_steps(ctx, a, task, *source));
  if (disputed.steps.empty()) return disputed.exit;
  const std::vector<std::uint64_t>& steps = disputed.steps;
  if (!a.source.workdir.empty()) {
    // A workdir cannot answer for its provider: say what to ask it.
    const std::string ask = "veritrain trace --task T --workdir D --epoch " +
                            std::to_string(a.epoch) + " --step " + std::to_string(steps.front()) +
                            " --out trace.json";
    emit(ctx, {{"ok", false}, {"epoch", a.epoch}, {"steps", steps}, {"next", ask}},
         "epoch " + std::to_string(a.epoch) + " diverges within steps " +
             std::to_string(steps.front()) + ".." + std::to_string(steps.back()) +
             "; ask the provider for its trace of step " + std::to_string(steps.front()) + " (" +
             ask + "), then run dispute with --provider-trace trace.json\n");
    return exit_code(Errc::kRejected);
  }
  for (const std::uint64_t step : steps) {
    const std::string where = source->describe() + ": trace of step " + std::to_string(step);
    auto answer = source->step_trace(a.epoch, step, std::nullopt);
    auto provider = answer.ok() ? read_trace(*answer, where, task)
                                : Result<dispute::SignedTrace>(answer.error());
    if (provider.ok() && (provider->trace.header.epoch != a.epoch ||
                          provider->trace.header.step != static_cast<std::int64_t>(step)))
      provider = rejected(where + ": the provider answered with its trace of step " +
                          std::to_string(provider->trace.header.step) + " of epoch " +
                          std::to_string(provider->trace.header.epoch));
    if (!provider.ok() && provider.error().code == Errc::kRejected) {
      // Withheld, oversized, malformed or for another step: the provider does not answer for a
      // step of an epoch it committed, which is its failure, said as a rejection naming the step.
      emit(ctx,
           {{"ok", false},
            {"epoch", a.epoch},
            {"step", step},
            {"result", "withheld"},
            {"summary", provider.error().message}},
           "the provider does not answer for step " + std::to_string(step) + " of epoch " +
               std::to_string(a.epoch) + ": " + provider.error().message + "\n");
      return exit_code(Errc::kRejected);
    }
    if (!provider.ok()) return provider.error();
    const dispute::TraceHeader& h = provider->trace.header;
    auto values_for = [&](std::int64_t call) -> Result<std::optional<dispute::CallValues>> {
      const std::string at = source->describe() + ": values of call " + std::to_string(call);
      VT_ASSIGN_OR_RETURN(Bytes v,
                          source->step_trace(a.epoch, step, static_cast<std::uint64_t>(call)));
      VT_ASSIGN_OR_RETURN(
          dispute::CallValues values,
          provider_answer(dispute::read_call_values(
              std::string_view(reinterpret_cast<const char*>(v.data()), v.size()), at, h)));
      return std::optional(std::move(values));
    };
    VT_ASSIGN_OR_RETURN(StepDispute d, dispute_step(ctx, a, task, start, *provider, values_for));
    // A step named with --step answers for itself; steps the audit found answer for the epoch.
    if (d.departs || a.step > 0) return d.exit;
  }
  // Every trace agrees with the replay, yet the epoch diverges: the provider's own arithmetic
  // convicts its commitments.
  emit(ctx, {{"ok", false}, {"epoch", a.epoch}, {"result", "commitment_differs"}},
       "the provider's traces of steps " + std::to_string(steps.front()) + ".." +
           std::to_string(steps.back()) +
           " agree with the replay call for call, yet what it committed for epoch " +
           std::to_string(a.epoch) +
           " is not what they lead to: its commitments, not its arithmetic, are wrong (the "
           "step-level evidence of `veritrain audit` shows it)\n");
  return exit_code(Errc::kRejected);
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
  add_source_options(dispute, d->source);
  dispute->add_option("--epoch", d->epoch, "The disputed epoch (with --provider)");
  dispute->add_option("--step", d->step,
                      "The disputed step (default: those the trail leaves open, in order)");
  dispute->add_option("--provider-trace", d->provider_trace,
                      "Offline: the provider's signed trace of the step (veritrain trace)");
  dispute->add_option(
      "--provider-values", d->provider_values,
      "Offline: the provider's values of the disputed call (veritrain trace --call)");
  dispute->add_option("--evidence", d->evidence, "Write signed operator evidence here");
  dispute->add_option("--report", d->report,
                      "Folder for report.html: the ruling as a page an arbiter reads");
  dispute->add_option("--key", d->key,
                      "Auditor key folder; default: $XDG_CONFIG_HOME/veritrain/verifier");
  dispute->add_option("--threads", d->threads, "Replay with this intra-op thread count")
      ->check(CLI::Range(1, 4096));
  dispute
      ->add_option("--evidence-timeout", d->evidence_timeout,
                   "Seconds to wait for each answer of the provider")
      ->capture_default_str();
  dispute->callback([&ctx, d] { ctx.action = [&ctx, d] { return run_dispute(ctx, *d); }; });
}

}  // namespace vt::cli
