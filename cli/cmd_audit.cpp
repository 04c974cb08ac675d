// `veritrain audit`: the auditor's command. It replays one disputed epoch from the provider's
// stored states and writes signed evidence that anyone can re-check (`audit --check`).
#include <filesystem>

#include "cli/app.h"
#include "cli/verifier_identity.h"
#include "common/file_io.h"
#include "common/text.h"
#include "verifier/audit/audit.h"
#include "verifier/audit/evidence_page.h"
#include "verifier/audit/second_opinion.h"
#include "verifier/check/environment_check.h"

namespace vt::cli {
namespace {
namespace fs = std::filesystem;

struct AuditArgs {
  std::string task, workdir, evidence, check, key, device, provider_key, report;
  std::uint64_t epoch = 0;
  std::int64_t threads = 0;
  bool second_opinion = false;
  std::string reference, python = "/usr/bin/python3";
};

// audit --second-opinion: the reference replays the same epoch from the same stored state, and
// the finding (so the evidence) records whether it lands where veritrain's replay landed.
Status add_second_opinion(verifier::AuditFinding& f, const Task& task,
                          verifier::EvidenceSource& source, const AuditArgs& a) {
  VT_ASSIGN_OR_RETURN(std::vector<SignedRecord> records, source.log());
  VT_ASSIGN_OR_RETURN(
      Bytes before,
      source.snapshot(a.epoch - 1, records.at(a.epoch - 1).record.root, std::nullopt));
  verifier::SecondOpinionOptions o;
  o.python = a.python;
  o.script = a.reference;
  if (o.script.empty()) {
    // Installed beside this binary (cli/CMakeLists.txt copies reference/ there).
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    o.script = self.parent_path() / "reference" / "replay_ref.py";
    if (ec || !fs::is_regular_file(o.script))
      return invalid_input("--second-opinion: no reference replayer at " + o.script.string() +
                           " (reference/ is installed beside veritrain-torch); give --reference");
  }
  if (!task.dataset.files.empty()) o.data_dir = fs::path(a.task).parent_path() / task.dataset.path;
  VT_ASSIGN_OR_RETURN(
      verifier::SecondOpinion s,
      verifier::second_opinion(canonical_task_json(task), before, f.replay_root, o));
  f.second_opinion = verifier::second_opinion_to_json(s);
  f.summary += s.status == "not_covered"
                   ? "; second opinion: the reference does not cover this task"
                   : "; second opinion: the reference replay " + s.status +
                         " with veritrain's (root " + hex_encode(s.reference_root) + ")";
  return {};
}

Result<int> run_audit(Context& ctx, const AuditArgs& a) {
  VT_ASSIGN_OR_RETURN(Task task, load_task(a.task));
  VT_ASSIGN_OR_RETURN(std::optional<std::string> pinned,
                      pinned_provider_key(a.provider_key, "audit"));
  VT_ASSIGN_OR_RETURN(auto source, verifier::open_workdir_source(a.workdir));
  source->set_limits(verifier::limits_for(task));
  VT_RETURN_IF_ERROR(verifier::check_workdir_task(*source, task, a.workdir));
  VT_RETURN_IF_ERROR(check_log_signer(*source, task, pinned));
  training::TrainerOptions t;
  t.task_dir = fs::path(a.task).parent_path();
  t.device = a.device;
  t.intra_op_threads = a.threads;
  VT_ASSIGN_OR_RETURN(auto environment, verifier::adopt_committed_environment(
                                            *source, task, t, false, std::chrono::seconds(0)));
  if (environment && !environment->unmatched.empty()) {
    std::string differ;
    for (const EnvironmentDifference& d : environment->unmatched)
      differ += (differ.empty() ? "" : "; ") + d.field + " " + printable(d.committed) +
                " committed, " + printable(d.here) + " here";
    Environment committed;
    if (auto records = source->log(); records && !records->empty())
      committed = records->front().record.environment.value_or(Environment{});
    const std::string judge = verifier::what_would_judge(environment->unmatched, committed);
    emit(ctx,
         {{"ok", false},
          {"kind", "audit"},
          {"result", "inconclusive"},
          {"differences", differ},
          {"would_judge", judge}},
         "inconclusive: this machine cannot reproduce the provider's arithmetic environment (" +
             differ + "), so it replays nothing; what would judge it: " + judge + "\n");
    return kExitInconclusive;
  }
  // A replay that misses the commitment is run again in a fresh process of this binary before
  // it may accuse (verifier/check/second_replay.h).
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (!a.check.empty()) {
    VT_RETURN_IF_ERROR(check_input_file(a.check, "--check"));
    VT_ASSIGN_OR_RETURN(std::string text, read_text_file(a.check));
    VT_ASSIGN_OR_RETURN(verifier::EvidenceCheck c,
                        verifier::check_evidence(text, *source, task, t, self));
    emit(ctx,
         {{"ok", c.agrees},
          {"kind", "audit check"},
          {"auditor", c.auditor_fingerprint},
          {"claimed", verifier::finding_to_json(c.claimed)},
          {"recomputed", verifier::finding_to_json(c.recomputed)}},
         std::string(c.agrees ? "evidence re-checks: " : "evidence does NOT re-check: ") +
             c.recomputed.summary + "\n");
    return c.agrees ? 0 : exit_code(Errc::kRejected);
  }
  if (a.epoch == 0)
    return invalid_input("audit needs --epoch E (1..epochs) or --check evidence.json");
  VT_ASSIGN_OR_RETURN(verifier::AuditFinding f,
                      verifier::audit_epoch(*source, task, a.epoch, t, self));
  // Nothing was replayed when the start state is unusable: there is nothing to compare.
  if (a.second_opinion && f.start_state_problem.empty())
    VT_RETURN_IF_ERROR(add_second_opinion(f, task, *source, a));
  nlohmann::json j = verifier::finding_to_json(f);
  VT_ASSIGN_OR_RETURN(std::vector<SignedRecord> records, source->log());
  verifier::EvidencePageInfo page{
      hex_encode(task_id(task)), a.task, a.workdir,  "",
      pinned.has_value(),        "",     a.evidence, replays_bit_for_bit(task)};
  if (auto signer = PublicKey::from_raw(records.at(a.epoch).record.signer))
    page.provider_key = signer->fingerprint();
  // The epoch stands only when its replay is the commitment and the provider can show that
  // commitment's state; a corrupt stored state fails the audit as it failed the verifier.
  const bool sound = f.bit_identical && f.stored_state_problem.empty();
  // Replays that differ from each other judge nothing, unless the stored evidence itself is bad.
  const bool unjudged = !f.irreproducible.empty() && f.stored_state_problem.empty();
  j["ok"] = sound;
  if (unjudged) j["result"] = "inconclusive";
  if (!a.evidence.empty()) {
    VT_ASSIGN_OR_RETURN(SigningKey key, verifier_key(a.key));
    VT_ASSIGN_OR_RETURN(std::string text, verifier::make_evidence(f, task, records.at(a.epoch - 1),
                                                                  records.at(a.epoch), key));
    VT_RETURN_IF_ERROR(write_file_atomic(a.evidence, text));
    j["evidence"] = a.evidence;
    page.auditor_key = key.public_key().fingerprint();
  }
  if (!a.report.empty()) {
    VT_RETURN_IF_ERROR(verifier::write_evidence_page(a.report, f, page));
    j["report"] = (fs::path(a.report) / "report.html").string();
  }
  emit(ctx, j,
       f.summary + "\n" + (a.evidence.empty() ? "" : "evidence: " + a.evidence + "\n") +
           (a.report.empty() ? ""
                             : "report: " + (fs::path(a.report) / "report.html").string() + "\n"));
  if (unjudged) return kExitInconclusive;
  return sound ? 0 : exit_code(Errc::kRejected);
}

}  // namespace

void register_audit(CLI::App& app, Context& ctx) {
  auto a = std::make_shared<AuditArgs>();
  auto* audit = app.add_subcommand("audit", summary_of("audit"));
  audit->add_option("--task", a->task, "task.json")->required();
  audit->add_option("--workdir", a->workdir, "The provider's workdir (or a copy)")->required();
  audit->add_option("--epoch", a->epoch, "The disputed epoch");
  audit->add_option("--evidence", a->evidence, "Write signed evidence here");
  audit->add_option("--report", a->report,
                    "Folder for report.html: the finding as a page an arbiter can read");
  audit->add_option("--check", a->check, "Re-check an evidence file instead");
  audit->add_option("--key", a->key,
                    "Auditor key folder; default: $XDG_CONFIG_HOME/veritrain/verifier");
  audit->add_option("--provider-key", a->provider_key,
                    "The provider's signing.pub.pem or its key's SHA-256");
  audit->add_option("--device", a->device, "Replay on cpu, cuda or cuda:N");
  audit->add_option("--threads", a->threads, "Replay with this intra-op thread count");
  audit->add_flag(
      "--second-opinion", a->second_opinion,
      "Also replay with the independent PyTorch reference and record whether it agrees");
  // Its default is a path on the machine veritrain was built on: named, not printed.
  audit->add_option("--reference", a->reference,
                    "The reference replayer; default: reference/replay_ref.py beside this binary");
  audit->add_option("--python", a->python, "Interpreter with python3-torch for the reference")
      ->capture_default_str();
  audit->callback([&ctx, a] { ctx.action = [&ctx, a] { return run_audit(ctx, *a); }; });
}

}  // namespace vt::cli
