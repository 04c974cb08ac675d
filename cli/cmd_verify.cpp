// `veritrain verify`: the requestor's command. It challenges random epochs of a provider's log,
// replays them (in worker processes, `replay-worker`) and writes a signed verdict.
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <iostream>
#include <thread>

#include "cli/app.h"
#include "cli/service.h"
#include "cli/source_args.h"
#include "cli/verifier_identity.h"
#include "cli/verify_bar.h"
#include "common/file_io.h"
#include "training/estimate.h"
#include "verifier/check/environment_check.h"
#include "verifier/check/replay_jobs.h"
#include "verifier/check/verify.h"
#include "verifier/check/verify_state.h"
#include "verifier/policy/cost_plan.h"
#include "verifier/report/report_folder.h"

namespace vt::cli {
namespace {
namespace fs = std::filesystem;

struct VerifyArgs {
  std::string task, report, key, device, seed, provider_key, fetch_after = "auto", resume;
  double evidence_timeout = 600;
  double confidence = 0.99, cheat_fraction = 0.1, check_probability = 0.0;
  std::optional<double> reward, penalty, cost;  // p from the economics (docs/plan.md)
  bool online = false, fingerprint_only = false, force = false, checkpoint_activations = false;
  bool policy_given = false;  // --confidence or --cheat-fraction was on the line
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
               std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                   std::chrono::duration<double>(a.deadline_seconds));
  }
  VT_ASSIGN_OR_RETURN(Task task, load_task(a.task));
  // The verifier's own inputs first: any error in them is exit 2 before the provider is judged.
  if (!a.resume.empty() && !a.report.empty() && fs::path(a.resume) != fs::path(a.report)) {
    return invalid_input("--resume " + a.resume + " and --report " + a.report +
                         ": the resumed run writes its verdict "
                         "where the interrupted one would have; give one of them");
  }
  if (!a.resume.empty() && a.online) {
    return invalid_input(
        "--resume: only an offline verify can be resumed (an online one draws its challenges as "
        "epochs arrive); run it again without --online");
  }
  const fs::path report(a.report.empty() ? a.resume : a.report);
  if (report.empty()) return invalid_input("verify needs --report DIR (or --resume DIR)");
  if (!(a.evidence_timeout > 0))
    return invalid_input("--evidence-timeout must be a positive number of seconds");
  VT_ASSIGN_OR_RETURN(std::optional<std::string> pinned,
                      pinned_provider_key(a.provider_key, "verify"));
  VT_ASSIGN_OR_RETURN(SigningKey key, verifier_key(a.key));
  const auto evidence_timeout =
      std::chrono::milliseconds(static_cast<std::int64_t>(a.evidence_timeout * 1000));
  // A signed verdict is a record someone may rely on: replacing one takes --force.
  if (a.resume.empty() && !a.force && fs::exists(report / "verdict.json")) {
    return invalid_input("--report " + report.string() +
                         " already holds a signed verdict; give another folder, or --force to "
                         "replace it");
  }
  VT_ASSIGN_OR_RETURN(auto source, open_source(a.source, evidence_timeout, deadline, a.online));
  source->set_limits(verifier::limits_for(task));
  if (!a.source.workdir.empty())
    VT_RETURN_IF_ERROR(verifier::check_workdir_task(*source, task, a.source.workdir, pinned));
  verifier::VerifyOptions o;
  o.trainer.task_dir = fs::path(a.task).parent_path();
  o.trainer.device = a.device;
  o.trainer.intra_op_threads = a.threads;
  o.trainer.checkpoint_activations = a.checkpoint_activations;
  // Before anything here runs a LibTorch kernel (the cost estimate below does): ATen and oneDNN
  // choose their levels once per process, and replays must run at the provider's.
  VT_ASSIGN_OR_RETURN(o.environment, verifier::adopt_committed_environment(
                                         *source, task, o.trainer, a.online, evidence_timeout));
  o.provider_key = pinned;
  o.policy.confidence = a.confidence;
  o.policy.cheat_fraction = a.cheat_fraction;
  o.policy.defaults = !a.policy_given;
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
  auto bar = std::make_shared<VerifyBar>();
  o.on_event = [bar](const std::string& line) { bar->event(line); };
  if (bar->on()) o.on_progress = [bar](const verifier::VerifyProgress& p) { bar->update(p); };
  o.replay_jobs = a.jobs;
  std::error_code ec;
  o.replay_program =
      fs::read_symlink("/proc/self/exe", ec);  // this binary: its replay-worker command
  if (ec && a.jobs != 1)
    spdlog::warn("verify: cannot locate this program ({}); replaying in this process",
                 ec.message());
  if (!a.online) o.state_dir = verifier::state_dir(report);
  o.resume = !a.resume.empty();
  Result<verifier::Verdict> judged = verifier::verify(*source, task, o);
  bar->finish();
  VT_ASSIGN_OR_RETURN(verifier::Verdict verdict, std::move(judged));

  const std::string next = verifier::next_step_command(verdict, a.task, a.source.workdir);
  VT_RETURN_IF_ERROR(verifier::write_report_folder(report, verdict, key, next));
  fs::remove_all(verifier::state_dir(report),
                 ec);  // it holds the secret seed; the verdict stands now
  nlohmann::json out = verifier::verdict_to_json(verdict, key.public_key());
  out["ok"] = verdict.accepted;
  // Which key signed: what `verdict check --signer` is given, wherever the key folder is.
  emit(ctx, out,
       verifier::verdict_summary(verdict, report) + "verdict signed by verifier key " +
           key.public_key().fingerprint() + "\n" + (next.empty() ? "" : "next: " + next + "\n"));
  if (verdict.inconclusive) return kExitInconclusive;
  return verdict.accepted ? 0 : exit_code(Errc::kRejected);
}

struct ReplayWorkerArgs {
  std::string task, task_dir, device;
  std::int64_t threads = 0;
  bool checkpoint_activations = false;
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
  w.trainer.checkpoint_activations = a.checkpoint_activations;
  VT_RETURN_IF_ERROR(verifier::run_replay_worker(w, std::cin, std::cout));
  return 0;
}

}  // namespace

void register_verify(CLI::App& app, Context& ctx) {
  auto v = std::make_shared<VerifyArgs>();
  auto* verify = app.add_subcommand("verify", summary_of("verify"));
  verify->add_option("--task", v->task, "Your task.json (what you paid for)")->required();
  add_source_options(verify, v->source);
  const auto given = [v](const std::string&) { v->policy_given = true; };
  auto* confidence =
      verify->add_option("--confidence", v->confidence, "Probability of catching the cheat below")
          ->capture_default_str()
          ->each(given);
  verify->add_option("--cheat-fraction", v->cheat_fraction, "Fraction of epochs a cheater skips")
      ->capture_default_str()
      ->each(given);
  auto* fixed = verify->add_option("--check-probability", v->check_probability,
                                   "Challenge each epoch with this p instead");
  auto* reward = verify->add_option(
      "--reward", v->reward,
      "R: payment to an accepted provider; sets p so that cheating never pays (with --penalty)");
  verify->add_option("--penalty", v->penalty, "D: the provider's deposit, forfeited when caught")
      ->needs(reward);
  verify
      ->add_option("--cost", v->cost,
                   "K: the honest training cost (default: measured device-seconds)")
      ->needs(reward);
  reward->excludes(fixed)->excludes(confidence);
  verify->add_flag("--online", v->online,
                   "Check epochs as they are committed, while training runs");
  verify->add_flag("--fingerprint-only", v->fingerprint_only,
                   "Judge replays by fingerprint; don't fetch 'after' snapshots");
  verify
      ->add_option("--fetch-after", v->fetch_after,
                   "auto: fetch an epoch's 'after' state only when it is needed (tolerance mode, a "
                   "missed root, "
                   "the next challenged epoch's start); always: every time (a storage audit)")
      ->check(CLI::IsMember({"auto", "always"}))
      ->capture_default_str();
  verify->add_option("--device", v->device, "Replay on cpu, cuda or cuda:N");
  verify->add_option("--threads", v->threads,
                     "Replay with this intra-op thread count (tolerance-mode tasks)");
  verify->add_flag("--checkpoint-activations", v->checkpoint_activations,
                   "Replay recomputing each block's activations in the backward pass instead of "
                   "keeping them (the zoo's gpt): less memory, the same bits");
  verify->add_option(
      "--jobs", v->jobs,
      "Replays at once, each in its own process (default 0: as cores and memory allow; 1 on "
      "a GPU)");
  verify->add_option("--seed", v->seed,
                     "Reproduce a run's challenges (hex); default: fresh OS randomness");
  verify
      ->add_option(
          "--deadline", v->deadline_seconds,
          "Seconds the provider has to deliver everything; past it, what is missing rejects it")
      ->check(CLI::PositiveNumber);
  verify->add_option("--report", v->report, "Folder for verdict.json and report.html");
  verify->add_flag("--force", v->force, "Replace a signed verdict already in the --report folder");
  verify->add_option(
      "--resume", v->resume,
      "Continue the interrupted offline verify that was writing to this --report folder: the same "
      "challenges, without replaying epochs it already judged");
  verify->add_option("--key", v->key,
                     "Verifier key folder; default: $XDG_CONFIG_HOME/veritrain/verifier");
  verify->add_option("--provider-key", v->provider_key,
                     "The provider's signing.pub.pem or its key's SHA-256: a log signed by any "
                     "other key is rejected");
  verify
      ->add_option(
          "--evidence-timeout", v->evidence_timeout,
          "Seconds the provider has to deliver the log or a snapshot before it counts as withheld")
      ->capture_default_str();
  verify->callback([&ctx, v] { ctx.action = [&ctx, v] { return run_verify(ctx, *v); }; });

  // Internal: a long-lived replay process for `verify --jobs` (verifier/check/replay_jobs.h),
  // talking JSON lines on stdin and stdout. Not in --help: its files are the parent's scratch
  // files.
  auto r = std::make_shared<ReplayWorkerArgs>();
  auto* replay = app.add_subcommand(
      "replay-worker", "Replay epochs from state files on request (used by verify --jobs)");
  replay->group("");
  replay->add_option("--task", r->task, "task.json")->required();
  replay->add_option("--task-dir", r->task_dir, "Where the task's relative paths resolve");
  replay->add_option("--device", r->device, "Replay on cpu, cuda or cuda:N");
  replay->add_option("--threads", r->threads, "Intra-op thread count (0: the task's)");
  replay->add_flag("--checkpoint-activations", r->checkpoint_activations,
                   "Recompute each block's activations in the backward pass");
  replay->callback([&ctx, r] { ctx.action = [r] { return run_replay_worker(*r); }; });
}

}  // namespace vt::cli
