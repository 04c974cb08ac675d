// `veritrain verify`, `audit` and `plan`: the requestor's and the auditor's commands.
#include <sys/prctl.h>
#include <unistd.h>

#include <sys/stat.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <spdlog/spdlog.h>

#include "cli/app.h"
#include "cli/plan_args.h"
#include "cli/service.h"
#include "cli/verify_bar.h"
#include "common/file_io.h"
#include "compression/container.h"
#include "protocol/keys.h"
#include "training/estimate.h"
#include "training/runtime.h"
#include "verifier/audit.h"
#include "verifier/evidence_page.h"
#include "verifier/html_report.h"
#include "verifier/report_folder.h"
#include "verifier/verify_state.h"
#include "verifier/log_check.h"
#include "verifier/plan.h"
#include "verifier/replay_jobs.h"
#include "verifier/second_opinion.h"
#include "verifier/verify.h"

namespace vt::cli {
namespace {
namespace fs = std::filesystem;

struct SourceArgs {
  std::string provider, token_file, pin, ca_file, workdir;
  bool insecure = false;
};

void add_source_options(CLI::App* cmd, SourceArgs& s) {
  auto* provider = cmd->add_option("--provider", s.provider, "The provider's service, HOST:PORT");
  auto* workdir = cmd->add_option("--workdir", s.workdir, "Or: the provider's workdir, read offline");
  provider->excludes(workdir);
  cmd->add_option("--token-file", s.token_file, "The provider's access token")->needs(provider);
  cmd->add_option("--pin", s.pin, "SHA-256 of the provider's TLS certificate")->needs(provider);
  cmd->add_option("--ca-file", s.ca_file, "Or: a CA that signed the provider's certificate")->needs(provider);
  cmd->add_flag("--insecure", s.insecure, "Plain TCP (loopback only)")->needs(provider);
}

Result<std::unique_ptr<verifier::EvidenceSource>> open_source(
    const SourceArgs& s, std::chrono::milliseconds evidence_timeout = verifier::kDefaultEvidenceTimeout,
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max()) {
  if (!s.workdir.empty()) return verifier::open_workdir_source(s.workdir);
  if (s.provider.empty()) return invalid_input("give --provider HOST:PORT or --workdir DIR");
  VT_ASSIGN_OR_RETURN(auto hp, parse_host_port(s.provider, "--provider"));
  ClientConfig config;
  config.host = hp.first;
  config.port = hp.second;
  config.insecure = s.insecure;
  config.pin_sha256 = s.pin;
  config.ca_file = s.ca_file;
  config.io_timeout = std::min(config.io_timeout, evidence_timeout);  // one stalled frame cannot outlast it
  config.deadline = deadline;
  if (s.token_file.empty()) return invalid_input("--provider needs --token-file (the provider's serve.token)");
  VT_ASSIGN_OR_RETURN(config.token, read_secret_file(s.token_file, 4096));
  while (!config.token.empty() && std::isspace(static_cast<unsigned char>(config.token.back()))) config.token.pop_back();
  if (!s.insecure && s.pin.empty() && s.ca_file.empty()) {
    return invalid_input("--provider over TLS needs --pin SHA256 (printed by the provider) or --ca-file");
  }
  return verifier::open_provider_source(config, evidence_timeout);
}

// The verifier's (and auditor's) own identity persists, so that verdicts from one verifier name
// one key: $XDG_CONFIG_HOME/veritrain/verifier (or ~/.config/...), made 0700 on first use.
Result<fs::path> default_key_dir() {
  const char* xdg = std::getenv("XDG_CONFIG_HOME");
  const char* home = std::getenv("HOME");
  fs::path base;
  if (xdg != nullptr && *xdg == '/') {
    base = xdg;
  } else if (home != nullptr && *home == '/') {
    base = fs::path(home) / ".config";
  } else {
    return invalid_input("no $XDG_CONFIG_HOME or $HOME to keep the verifier key in: give --key DIR");
  }
  return base / "veritrain" / "verifier";
}

Result<SigningKey> verifier_key(const std::string& key_dir) {
  fs::path dir;
  if (key_dir.empty()) {
    VT_ASSIGN_OR_RETURN(dir, default_key_dir());
  } else {
    dir = key_dir;
  }
  std::error_code ec;
  if (!fs::exists(dir, ec)) {
    fs::create_directories(dir.parent_path(), ec);
    if (ec) return io_error("creating " + dir.parent_path().string() + ": " + ec.message());
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) return io_error(errno_text(errno, "creating", dir));
    spdlog::info("verifier key: creating {} (used for every later verdict)", dir.string());
  }
  return load_or_create_signing_key(dir);
}

// --provider-key, when given: the log must be signed by it (docs/verifier.md, "Trust").
Result<std::optional<std::string>> pinned_provider_key(const std::string& arg, const char* command) {
  if (arg.empty()) {
    spdlog::warn("{}: no --provider-key: any key that signed the log is taken, and the verdict says it was not pinned",
                 command);
    return std::optional<std::string>();
  }
  VT_ASSIGN_OR_RETURN(std::string key, verifier::parse_provider_key(arg));
  return std::optional<std::string>(key);
}

// The log's signer against the pinned key, for the commands that read a log without check_log.
Status check_log_signer(verifier::EvidenceSource& source, const Task& task, const std::optional<std::string>& pinned) {
  if (!pinned) return {};
  VT_ASSIGN_OR_RETURN(std::vector<SignedRecord> records, source.log());
  auto checked = verify_log(records, task_id(task));
  if (!checked) return rejected(checked.error().message);
  if (checked->signer_fingerprint != *pinned) {
    return rejected("the log is signed by key " + checked->signer_fingerprint + ", not by the provider key given with "
                    "--provider-key (" + *pinned + ")");
  }
  return {};
}

struct VerifyArgs {
  std::string task, report, key, device, seed, provider_key, fetch_after = "auto", resume;
  double evidence_timeout = 600;
  double confidence = 0.99, cheat_fraction = 0.1, check_probability = 0.0;
  std::optional<double> reward, penalty, cost;  // p from the economics (docs/plan.md)
  bool online = false, fingerprint_only = false;
  std::int64_t threads = 0;
  std::size_t jobs = 0;
  double deadline_seconds = 0;  // 0: none
  SourceArgs source;
};

// R, D and K for `verify --reward`; K is measured (plan's estimate) when --cost is not given.
Result<verifier::EconomicsRequest> economics_request(const Task& task, const VerifyArgs& a) {
  verifier::EconomicsRequest e;
  e.reward = *a.reward;
  e.penalty = a.penalty.value_or(0.0);
  if (a.cost) {
    e.cost = *a.cost;
    return e;
  }
  training::TrainerOptions t;
  t.task_dir = fs::path(a.task).parent_path();
  t.device = a.device;
  t.intra_op_threads = a.threads;
  VT_ASSIGN_OR_RETURN(training::MemoryEstimate est, training::estimate(task, t));
  e.cost = verifier::estimated_honest_cost(est, static_cast<std::uint64_t>(task.epochs));
  e.cost_basis = verifier::kEstimatedCostBasis;
  return e;
}

Result<int> run_verify(Context& ctx, const VerifyArgs& a) {
  auto deadline = std::chrono::steady_clock::time_point::max();
  if (a.deadline_seconds > 0) {
    deadline = std::chrono::steady_clock::now() +
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(a.deadline_seconds));
  }
  VT_ASSIGN_OR_RETURN(Task task, load_task(a.task));
  // The verifier's own inputs first: any error in them is exit 2 before the provider is judged.
  if (!a.resume.empty() && !a.report.empty() && fs::path(a.resume) != fs::path(a.report)) {
    return invalid_input("--resume " + a.resume + " and --report " + a.report + ": the resumed run writes its verdict "
                         "where the interrupted one would have; give one of them");
  }
  if (!a.resume.empty() && a.online) {
    return invalid_input("--resume: only an offline verify can be resumed (an online one draws its challenges as "
                         "epochs arrive); run it again without --online");
  }
  const fs::path report(a.report.empty() ? a.resume : a.report);
  if (report.empty()) return invalid_input("verify needs --report DIR (or --resume DIR)");
  if (!(a.evidence_timeout > 0)) return invalid_input("--evidence-timeout must be a positive number of seconds");
  VT_ASSIGN_OR_RETURN(std::optional<std::string> pinned, pinned_provider_key(a.provider_key, "verify"));
  VT_ASSIGN_OR_RETURN(SigningKey key, verifier_key(a.key));
  const auto evidence_timeout = std::chrono::milliseconds(static_cast<std::int64_t>(a.evidence_timeout * 1000));
  VT_ASSIGN_OR_RETURN(auto source, open_source(a.source, evidence_timeout, deadline));
  verifier::VerifyOptions o;
  o.provider_key = pinned;
  o.policy.confidence = a.confidence;
  o.policy.cheat_fraction = a.cheat_fraction;
  if (a.check_probability > 0) o.policy.check_probability = a.check_probability;
  if (a.reward) {
    VT_ASSIGN_OR_RETURN(o.policy.economics, economics_request(task, a));
  }
  if (!a.seed.empty()) o.seed_hex = a.seed;
  o.online = a.online;
  if (a.fingerprint_only && a.fetch_after == "always")
    return invalid_input("--fingerprint-only and --fetch-after always contradict each other");
  o.fetch_after = a.fingerprint_only          ? verifier::FetchAfter::kNever
                  : a.fetch_after == "always" ? verifier::FetchAfter::kAlways
                                              : verifier::FetchAfter::kAuto;
  o.trainer.task_dir = fs::path(a.task).parent_path();
  o.trainer.device = a.device;
  o.trainer.intra_op_threads = a.threads;
  auto bar = std::make_shared<VerifyBar>();
  o.on_event = [bar](const std::string& line) { bar->event(line); };
  if (bar->on()) o.on_progress = [bar](const verifier::VerifyProgress& p) { bar->update(p); };
  o.replay_jobs = a.jobs;
  std::error_code ec;
  o.replay_program = fs::read_symlink("/proc/self/exe", ec);  // this binary: its replay-worker command
  if (ec && a.jobs != 1) spdlog::warn("verify: cannot locate this program ({}); replaying in this process", ec.message());
  if (!a.online) o.state_dir = verifier::state_dir(report);
  o.resume = !a.resume.empty();
  Result<verifier::Verdict> judged = verifier::verify(*source, task, o);
  bar->finish();
  VT_ASSIGN_OR_RETURN(verifier::Verdict verdict, std::move(judged));

  const std::string next = verifier::audit_command(verdict, a.task, a.source.workdir);
  VT_RETURN_IF_ERROR(verifier::write_report_folder(report, verdict, key, next));
  fs::remove_all(verifier::state_dir(report), ec);  // it holds the secret seed; the verdict stands now
  nlohmann::json out = verifier::verdict_to_json(verdict, key.public_key());
  out["ok"] = verdict.accepted;
  emit(ctx, out,
       verifier::verdict_summary(verdict, report) + (next.empty() ? "" : "next: " + next + "\n"));
  return verdict.accepted ? 0 : exit_code(Errc::kRejected);
}

struct ReplayWorkerArgs {
  std::string task, task_dir, device;
  std::int64_t threads = 0;
};

Result<int> run_replay_worker(const ReplayWorkerArgs& a) {
  // A worker outliving its verifier (killed, say) would only burn CPU for results no one reads.
  const pid_t parent = ::getppid();
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) return io_error("replay-worker: the verifier that started it is gone");
  verifier::ReplayWorkerArgs w;
  w.task = a.task;
  w.trainer.task_dir = a.task_dir.empty() ? fs::path(a.task).parent_path() : fs::path(a.task_dir);
  w.trainer.device = a.device;
  w.trainer.intra_op_threads = a.threads;
  VT_RETURN_IF_ERROR(verifier::run_replay_worker(w, std::cin, std::cout));
  return 0;
}

struct AuditArgs {
  std::string task, workdir, evidence, check, key, device, provider_key, report;
  std::uint64_t epoch = 0;
  std::int64_t threads = 0;
  bool second_opinion = false;
  std::string reference = VT_REFERENCE_SCRIPT, python = "/usr/bin/python3";
};

// audit --second-opinion: the reference replays the same epoch from the same stored state, and
// the finding (so the evidence) records whether it lands where veritrain's replay landed.
Status add_second_opinion(verifier::AuditFinding& f, const Task& task, verifier::EvidenceSource& source,
                          const AuditArgs& a) {
  VT_ASSIGN_OR_RETURN(std::vector<SignedRecord> records, source.log());
  VT_ASSIGN_OR_RETURN(Bytes before, source.snapshot(a.epoch - 1, records.at(a.epoch - 1).record.root, std::nullopt));
  verifier::SecondOpinionOptions o;
  o.python = a.python;
  o.script = a.reference;
  if (!task.dataset.files.empty()) o.data_dir = fs::path(a.task).parent_path() / task.dataset.path;
  VT_ASSIGN_OR_RETURN(verifier::SecondOpinion s, verifier::second_opinion(canonical_task_json(task), before, f.replay_root, o));
  f.second_opinion = verifier::second_opinion_to_json(s);
  f.summary += s.status == "not_covered" ? "; second opinion: the reference does not cover this task"
                                         : "; second opinion: the reference replay " + s.status + " with veritrain's (root " +
                                               hex_encode(s.reference_root) + ")";
  return {};
}

Result<int> run_audit(Context& ctx, const AuditArgs& a) {
  VT_ASSIGN_OR_RETURN(Task task, load_task(a.task));
  VT_ASSIGN_OR_RETURN(std::optional<std::string> pinned, pinned_provider_key(a.provider_key, "audit"));
  VT_ASSIGN_OR_RETURN(auto source, verifier::open_workdir_source(a.workdir));
  VT_RETURN_IF_ERROR(check_log_signer(*source, task, pinned));
  training::TrainerOptions t;
  t.task_dir = fs::path(a.task).parent_path();
  t.device = a.device;
  t.intra_op_threads = a.threads;
  if (!a.check.empty()) {
    VT_ASSIGN_OR_RETURN(std::string text, read_text_file(a.check));
    VT_ASSIGN_OR_RETURN(verifier::EvidenceCheck c, verifier::check_evidence(text, *source, task, t));
    emit(ctx, {{"ok", c.agrees}, {"kind", "audit check"}, {"auditor", c.auditor_fingerprint}, {"claimed", verifier::finding_to_json(c.claimed)},
               {"recomputed", verifier::finding_to_json(c.recomputed)}},
         std::string(c.agrees ? "evidence re-checks: " : "evidence does NOT re-check: ") + c.recomputed.summary + "\n");
    return c.agrees ? 0 : exit_code(Errc::kRejected);
  }
  if (a.epoch == 0) return invalid_input("audit needs --epoch E (1..epochs) or --check evidence.json");
  VT_ASSIGN_OR_RETURN(verifier::AuditFinding f, verifier::audit_epoch(*source, task, a.epoch, t));
  if (a.second_opinion) VT_RETURN_IF_ERROR(add_second_opinion(f, task, *source, a));
  nlohmann::json j = verifier::finding_to_json(f);
  VT_ASSIGN_OR_RETURN(std::vector<SignedRecord> records, source->log());
  verifier::EvidencePageInfo page{hex_encode(task_id(task)), a.task, a.workdir, "", pinned.has_value(), "", a.evidence};
  if (auto signer = PublicKey::from_raw(records.at(a.epoch).record.signer)) page.provider_key = signer->fingerprint();
  j["ok"] = f.bit_identical;
  if (!a.evidence.empty()) {
    VT_ASSIGN_OR_RETURN(SigningKey key, verifier_key(a.key));
    VT_ASSIGN_OR_RETURN(std::string text, verifier::make_evidence(f, task, records.at(a.epoch - 1), records.at(a.epoch), key));
    VT_RETURN_IF_ERROR(write_file_atomic(a.evidence, text));
    j["evidence"] = a.evidence;
    page.auditor_key = key.public_key().fingerprint();
  }
  if (!a.report.empty()) {
    VT_RETURN_IF_ERROR(verifier::write_evidence_page(a.report, f, page));
    j["report"] = (fs::path(a.report) / "report.html").string();
  }
  emit(ctx, j, f.summary + "\n" + (a.evidence.empty() ? "" : "evidence: " + a.evidence + "\n") +
                   (a.report.empty() ? "" : "report: " + (fs::path(a.report) / "report.html").string() + "\n"));
  return f.bit_identical ? 0 : exit_code(Errc::kRejected);
}

struct VerdictCheckArgs {
  std::string file, signer;
};

// Exit 0 when the file is a well-formed verdict signed as it says (and by --signer when given),
// whatever the verdict's own result; 1 for a bad signature or another signer; 2 for a malformed file.
Result<int> run_verdict_check(Context& ctx, const VerdictCheckArgs& a) {
  std::optional<std::string> expected;
  if (!a.signer.empty()) {
    VT_ASSIGN_OR_RETURN(std::string fp, verifier::parse_provider_key(a.signer, "--signer"));
    expected = fp;
  }
  VT_ASSIGN_OR_RETURN(verifier::CheckedVerdict v, verifier::verify_verdict_file(a.file));
  const std::string signer = v.signer.fingerprint();
  if (expected && signer != *expected) {
    return rejected(a.file + ": signed by " + signer + ", not by the expected verifier key " + *expected);
  }
  const std::string result = v.accepted ? "accepted" : "rejected";
  emit(ctx,
       {{"ok", true}, {"signer", signer}, {"signer_expected", expected.has_value()}, {"result", result},
        {"task_id", v.task_id}, {"provider_key", v.provider_key}, {"provider_key_pinned", v.provider_key_pinned}},
       a.file + ": signature and format check out\nsigned by verifier key " + signer +
           (expected ? " (as expected)" : " (not compared: give --signer)") + "\nresult " + result + " for task " +
           v.task_id + "\nprovider key " + v.provider_key + (v.provider_key_pinned ? " (pinned)" : " (not pinned)") +
           "\n");
  return 0;
}

// The planner's bytes per check come from the codec's ratio on this task's own state after a
// couple of steps (momentum and moments filled in), not from a table.
Result<double> measured_codec_ratio(const Task& task, const training::TrainerOptions& t) {
  Task short_task = task;
  short_task.steps_per_epoch = 2;
  VT_ASSIGN_OR_RETURN(auto trainer, training::Trainer::create(short_task, t));
  VT_RETURN_IF_ERROR(trainer->train_epoch());
  VT_ASSIGN_OR_RETURN(Bytes canonical, trainer->snapshot());
  comp::EncodeOptions enc;
  enc.threads = 0;
  VT_ASSIGN_OR_RETURN(Bytes container, comp::encode(canonical, enc));
  return static_cast<double>(container.size()) / static_cast<double>(canonical.size());
}

Result<int> run_plan(Context& ctx, const PlanArgs& a) {
  VT_ASSIGN_OR_RETURN(Task task, load_task(a.task));
  training::TrainerOptions t;
  t.task_dir = fs::path(a.task).parent_path();
  verifier::PlanInputs in = plan_inputs(task, a);
  // A GPU task planned on a machine without one: the bytes and replay time stay unknown (K from --cost).
  if (task.device.rfind("cuda", 0) != 0 || training::runtime_info().cuda_available) {
    VT_ASSIGN_OR_RETURN(in.estimate, training::estimate(task, t));
    VT_ASSIGN_OR_RETURN(in.codec_ratio, measured_codec_ratio(task, t));
  } else {
    spdlog::warn("plan: no CUDA device here to measure the {} task on: per-check bytes and replay time are unknown",
                 task.device);
  }
  VT_ASSIGN_OR_RETURN(verifier::Plan plan, verifier::make_plan(in));
  emit(ctx, verifier::plan_to_json(plan), verifier::plan_text(plan));
  return 0;
}

}  // namespace

void register_verify(CLI::App& app, Context& ctx) {
  auto v = std::make_shared<VerifyArgs>();
  auto* verify = app.add_subcommand("verify", "Challenge random epochs, replay them, and judge the provider");
  verify->add_option("--task", v->task, "Your task.json (what you paid for)")->required();
  add_source_options(verify, v->source);
  auto* confidence =
      verify->add_option("--confidence", v->confidence, "Probability of catching the cheat below")->capture_default_str();
  verify->add_option("--cheat-fraction", v->cheat_fraction, "Fraction of epochs a cheater skips")->capture_default_str();
  auto* fixed = verify->add_option("--check-probability", v->check_probability, "Challenge each epoch with this p instead");
  auto* reward = verify->add_option("--reward", v->reward,
                                    "R: payment to an accepted provider; sets p so that cheating never pays (with --penalty)");
  verify->add_option("--penalty", v->penalty, "D: the provider's deposit, forfeited when caught")->needs(reward);
  verify->add_option("--cost", v->cost, "K: the honest training cost (default: measured device-seconds)")->needs(reward);
  reward->excludes(fixed)->excludes(confidence);
  verify->add_flag("--online", v->online, "Check epochs as they are committed, while training runs");
  verify->add_flag("--fingerprint-only", v->fingerprint_only, "Judge replays by fingerprint; don't fetch 'after' snapshots");
  verify->add_option("--fetch-after", v->fetch_after,
                     "auto: fetch an epoch's 'after' state only when it is needed (tolerance mode, a missed root, "
                     "the next challenged epoch's start); always: every time (a storage audit)")
      ->check(CLI::IsMember({"auto", "always"}))
      ->capture_default_str();
  verify->add_option("--device", v->device, "Replay on cpu, cuda or cuda:N");
  verify->add_option("--threads", v->threads, "Replay with this intra-op thread count (tolerance-mode tasks)");
  verify->add_option("--jobs", v->jobs, "Replays at once, each in its own process (default 0: as cores allow; 1 on a GPU)");
  verify->add_option("--seed", v->seed, "Reproduce a run's challenges (hex); default: fresh OS randomness");
  verify->add_option("--deadline", v->deadline_seconds,
                     "Seconds the provider has to deliver everything; past it, what is missing rejects it")
      ->check(CLI::PositiveNumber);
  verify->add_option("--report", v->report, "Folder for verdict.json and report.html");
  verify->add_option("--resume", v->resume,
                     "Continue the interrupted offline verify that was writing to this --report folder: the same "
                     "challenges, without replaying epochs it already judged");
  verify->add_option("--key", v->key, "Verifier key folder; default: $XDG_CONFIG_HOME/veritrain/verifier");
  verify->add_option("--provider-key", v->provider_key,
                     "The provider's signing.pub.pem or its key's SHA-256: a log signed by any other key is rejected");
  verify->add_option("--evidence-timeout", v->evidence_timeout,
                     "Seconds the provider has to deliver the log or a snapshot before it counts as withheld")
      ->capture_default_str();
  verify->callback([&ctx, v] { ctx.action = [&ctx, v] { return run_verify(ctx, *v); }; });

  // Internal: a long-lived replay process for `verify --jobs` (verifier/replay_jobs.h), talking
  // JSON lines on stdin and stdout. Not in --help: its files are the parent's scratch files.
  auto r = std::make_shared<ReplayWorkerArgs>();
  auto* replay = app.add_subcommand("replay-worker", "Replay epochs from state files on request (used by verify --jobs)");
  replay->group("");
  replay->add_option("--task", r->task, "task.json")->required();
  replay->add_option("--task-dir", r->task_dir, "Where the task's relative paths resolve");
  replay->add_option("--device", r->device, "Replay on cpu, cuda or cuda:N");
  replay->add_option("--threads", r->threads, "Intra-op thread count (0: the task's)");
  replay->callback([&ctx, r] { ctx.action = [r] { return run_replay_worker(*r); }; });

  auto a = std::make_shared<AuditArgs>();
  auto* audit = app.add_subcommand("audit", "Replay a disputed epoch offline and write signed evidence");
  audit->add_option("--task", a->task, "task.json")->required();
  audit->add_option("--workdir", a->workdir, "The provider's workdir (or a copy)")->required();
  audit->add_option("--epoch", a->epoch, "The disputed epoch");
  audit->add_option("--evidence", a->evidence, "Write signed evidence here");
  audit->add_option("--report", a->report, "Folder for report.html: the finding as a page an arbiter can read");
  audit->add_option("--check", a->check, "Re-check an evidence file instead");
  audit->add_option("--key", a->key, "Auditor key folder; default: $XDG_CONFIG_HOME/veritrain/verifier");
  audit->add_option("--provider-key", a->provider_key, "The provider's signing.pub.pem or its key's SHA-256");
  audit->add_option("--device", a->device, "Replay on cpu, cuda or cuda:N");
  audit->add_option("--threads", a->threads, "Replay with this intra-op thread count");
  audit->add_flag("--second-opinion", a->second_opinion,
                  "Also replay with the independent PyTorch reference and record whether it agrees");
  audit->add_option("--reference", a->reference, "The reference replayer (scripts/replay_ref.py)")->capture_default_str();
  audit->add_option("--python", a->python, "Interpreter with python3-torch for the reference")->capture_default_str();
  audit->callback([&ctx, a] { ctx.action = [&ctx, a] { return run_audit(ctx, *a); }; });

  auto vc = std::make_shared<VerdictCheckArgs>();
  auto* verdict = app.add_subcommand("verdict", "Check signed verdicts");
  verdict->require_subcommand(1);
  auto* check = verdict->add_subcommand("check", "Check a verdict's signature, format and signer");
  check->add_option("file", vc->file, "A verdict.json written by verify")->required();
  check->add_option("--signer", vc->signer, "The verifier key that must have signed it: SHA-256 or signing.pub.pem");
  check->callback([&ctx, vc] { ctx.action = [&ctx, vc] { return run_verdict_check(ctx, *vc); }; });

  auto p = std::make_shared<PlanArgs>();
  auto* plan = add_plan_command(app, *p);
  plan->callback([&ctx, p] { ctx.action = [&ctx, p] { return run_plan(ctx, *p); }; });
}

}  // namespace vt::cli
