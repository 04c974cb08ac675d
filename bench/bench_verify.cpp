// What a verification costs beside its replays: a provider trains an exact-mode task
// of E epochs into a scratch workdir; `verify` then challenges every epoch (p = 1), from the
// workdir, twice in one process: replays in parallel child processes (`--jobs`, default as
// cores allow), and all in the verifier's own process (`--jobs 1`, the baseline that pays no
// process start-up). Then one isolated epoch is checked as `--fetch-after auto` and `always` do.
//
//   verify_vs_replay_ratio        verify's wall time / the sum of its challenged epochs' replay
//                                 seconds (restore + epoch + snapshot, as each replay measures
//                                 itself), with the replays in child processes
//   verify_seconds, replay_seconds_sum, jobs
//   in_process_verify_vs_replay_ratio, in_process_verify_seconds, in_process_replay_seconds_sum
//                                 the same with --jobs 1
//   isolated_check_bytes          bytes an exact check of epoch E/2 alone fetches (auto)
//   isolated_check_bytes_always   the same with --fetch-after always (before: both states)
//   state_container_bytes         one whole compressed state (the codec's default options)
//   isolated_check_vs_state       isolated_check_bytes / state_container_bytes (goal <= 1.0)
//   second_replay_seconds         what a rejected epoch adds (docs/verifier.md, "A second replay
//                                 before a rejection"): epoch E/2 replayed again in a fresh
//                                 worker with scrambled memory, the worker's start included
//   second_replay_in_worker_seconds  the same replay as the worker measures it (restore + epoch +
//                                 snapshot): what is left is the worker's start
//   isolated_check_seconds        one check of that epoch (fetch, replay, judge) in process
//   second_replay_vs_check        second_replay_seconds / isolated_check_seconds
//
//   bench_verify [--json] [--epochs E] [--steps N] [--width N] [--jobs N] [--dir SCRATCH]

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <optional>

#include <CLI/CLI.hpp>

#include "bench/bench_util.h"
#include "compression/container.h"
#include "provider/provider.h"
#include "training/zoo/zoo.h"
#include "verifier/check/epoch_check.h"
#include "verifier/check/second_replay.h"
#include "verifier/check/verify.h"
#include "verifier/source/source.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using vt::bench::seconds_since;

struct Args {
  // A 0.1M-parameter cnn, 4 steps of 32 images: an epoch of about a second on one core, so that
  // a replay's fixed costs (process start-up, LibTorch's initialisation) are visible beside it.
  std::int64_t epochs = 8, steps = 4, width = 16;
  std::size_t jobs = 0;
  fs::path dir = fs::temp_directory_path();
};

// Flags through CLI11, as the veritrain binary takes them. Returns the exit code when the
// program should stop (help, or a flag that is wrong), nothing to go on.
std::optional<int> parse(int argc, char** argv, Args& a) {
  CLI::App app{"bench_verify: verify wall time against the sum of its replays, bytes per check"};
  app.add_option("--epochs", a.epochs, "Epochs of the task, all challenged")
      ->check(CLI::Range(2, 1 << 20));
  app.add_option("--steps", a.steps, "Steps per epoch")->check(CLI::PositiveNumber);
  app.add_option("--width", a.width, "cnn width")->check(CLI::PositiveNumber);
  app.add_option("--jobs", a.jobs, "verify --jobs (0: automatic)");
  app.add_option("--dir", a.dir, "Scratch folder");
  return vt::bench::parse_flags(app, argc, argv);
}

vt::Result<vt::Task> make_task(const Args& a) {
  VT_ASSIGN_OR_RETURN(vt::Task task, vt::training::default_task("cnn", "synthetic"));
  task.epochs = a.epochs;
  task.steps_per_epoch = a.steps;
  task.intra_op_threads = 1;
  task.determinism = vt::Determinism::kExact;
  task.optimizer = {.name = "adamw", .lr = 1e-3, .weight_decay = 0.01};
  task.model.options = {{"width", a.width}, {"blocks", 1}, {"classes", 10}};
  task.batch_size = 32;
  task.dataset.options = {{"samples", a.steps * task.batch_size}};
  VT_RETURN_IF_ERROR(vt::training::validate_for_training(task));
  return task;
}

struct Timed {
  double wall = 0, replays = 0;
  std::size_t checks = 0;
  bool accepted = false;
};

vt::Result<Timed> timed_verify(const vt::Task& task, const fs::path& workdir, std::size_t jobs) {
  VT_ASSIGN_OR_RETURN(auto source, vt::verifier::open_workdir_source(workdir));
  vt::verifier::VerifyOptions o;
  o.policy.check_probability = 1.0;
  o.seed_hex = "01";
  o.replay_jobs = jobs;
  o.replay_program = VT_BINARY;
  const auto t = Clock::now();
  VT_ASSIGN_OR_RETURN(vt::verifier::Verdict v, vt::verifier::verify(*source, task, o));
  Timed r;
  r.wall = seconds_since(t);
  for (const auto& c : v.checks) r.replays += c.replay_seconds;
  r.checks = v.checks.size();
  r.accepted = v.accepted;
  return r;
}

vt::Result<std::uint64_t> isolated_check_bytes(const vt::Task& task, const fs::path& workdir,
                                               std::uint64_t epoch,
                                               vt::verifier::FetchAfter fetch_after) {
  VT_ASSIGN_OR_RETURN(auto source, vt::verifier::open_workdir_source(workdir));
  source->set_limits(vt::verifier::limits_for(task));
  VT_ASSIGN_OR_RETURN(auto log, source->log());
  VT_ASSIGN_OR_RETURN(vt::verifier::CheckContext ctx,
                      vt::verifier::make_check_context(task, {}, fetch_after));
  VT_ASSIGN_OR_RETURN(
      vt::verifier::EpochCheck c,
      vt::verifier::check_epoch(*source, ctx, log.at(epoch - 1), log.at(epoch), false));
  if (!c.passed)
    return vt::internal_error("the honest epoch " + std::to_string(epoch) + " failed its check");
  return c.bytes_fetched;
}

struct SecondReplayCost {
  double check_seconds = 0, second_seconds = 0;
  double second_replay_alone = 0;  // restore + epoch + snapshot inside the worker
};

// One honest epoch checked, then replayed again as a missed one would be. The scrambled replay
// must land on the committed root too: scrambling changes nothing an honest kernel reads.
vt::Result<SecondReplayCost> second_replay_cost(const vt::Task& task, const fs::path& workdir,
                                                std::uint64_t epoch) {
  VT_ASSIGN_OR_RETURN(auto source, vt::verifier::open_workdir_source(workdir));
  source->set_limits(vt::verifier::limits_for(task));
  VT_ASSIGN_OR_RETURN(auto log, source->log());
  VT_ASSIGN_OR_RETURN(vt::verifier::CheckContext ctx, vt::verifier::make_check_context(task, {}));
  ctx.second_replay_program = VT_BINARY;
  SecondReplayCost cost;
  auto t = Clock::now();
  VT_ASSIGN_OR_RETURN(
      vt::verifier::EpochCheck c,
      vt::verifier::check_epoch(*source, ctx, log.at(epoch - 1), log.at(epoch), false));
  cost.check_seconds = seconds_since(t);
  if (!c.passed)
    return vt::internal_error("the honest epoch " + std::to_string(epoch) + " failed its check");
  VT_ASSIGN_OR_RETURN(vt::Bytes start,
                      source->snapshot(epoch - 1, log.at(epoch - 1).record.root, std::nullopt));
  t = Clock::now();
  VT_ASSIGN_OR_RETURN(vt::verifier::Replay again, vt::verifier::replay_again(ctx, epoch, start));
  cost.second_seconds = seconds_since(t);
  cost.second_replay_alone = again.seconds;
  if (again.root != log.at(epoch).record.root)
    return vt::internal_error("a replay with scrambled memory missed an honest epoch's root");
  return cost;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (auto stop = parse(argc, argv, args)) return *stop;
  auto fail = [](const std::string& what, const vt::Error& e) {
    std::fprintf(stderr, "bench_verify: %s: %s\n", what.c_str(), e.message.c_str());
    return 1;
  };
  auto task = make_task(args);
  if (!task) return fail("task", task.error());
  const fs::path scratch = args.dir / ("vt-bench-verify-" + std::to_string(::getpid()));
  const fs::path workdir = scratch / "wd";
  vt::provider::ProviderOptions po;
  po.workdir = workdir;
  if (auto trained = vt::provider::run_provider(*task, po); !trained)
    return fail("training", trained.error());

  auto children = timed_verify(*task, workdir, args.jobs);
  if (!children) return fail("verify with child processes", children.error());
  auto here = timed_verify(*task, workdir, 1);
  if (!here) return fail("verify in process", here.error());
  if (!children->accepted || !here->accepted)
    return fail("verify", vt::internal_error("an honest run was rejected"));

  const std::uint64_t middle = static_cast<std::uint64_t>(args.epochs) / 2;
  auto bytes_auto = isolated_check_bytes(*task, workdir, middle, vt::verifier::FetchAfter::kAuto);
  if (!bytes_auto) return fail("isolated check", bytes_auto.error());
  auto bytes_always =
      isolated_check_bytes(*task, workdir, middle, vt::verifier::FetchAfter::kAlways);
  if (!bytes_always) return fail("isolated check, fetch after always", bytes_always.error());
  auto second = second_replay_cost(*task, workdir, middle);
  if (!second) return fail("second replay", second.error());
  std::uint64_t state_bytes = 0;
  {
    auto source = vt::verifier::open_workdir_source(workdir);
    if (source.ok()) (*source)->set_limits(vt::verifier::limits_for(*task));
    auto log =
        source.ok() ? (*source)->log() : vt::Result<std::vector<vt::SignedRecord>>(source.error());
    if (!log) return fail("log", log.error());
    auto canonical = (*source)->snapshot(middle - 1, log->at(middle - 1).record.root, std::nullopt);
    if (!canonical) return fail("state", canonical.error());
    auto container = vt::comp::encode(*canonical);
    if (!container) return fail("encoding a state", container.error());
    state_bytes = container->size();
  }
  fs::remove_all(scratch);

  vt::bench::Report report(argc, argv);
  report.add("model", "cnn width " + std::to_string(args.width) + ", " +
                          std::to_string(args.steps) + " steps of 32 per epoch, AdamW, exact mode");
  report.add("epochs_challenged", children->checks);
  report.add("jobs", args.jobs == 0 ? std::string("automatic") : std::to_string(args.jobs));
  report.add("verify_seconds", children->wall);
  report.add("replay_seconds_sum", children->replays);
  report.add("verify_vs_replay_ratio", children->wall / children->replays);
  report.add("in_process_verify_seconds", here->wall);
  report.add("in_process_replay_seconds_sum", here->replays);
  report.add("in_process_verify_vs_replay_ratio", here->wall / here->replays);
  report.add("isolated_check_bytes", *bytes_auto);
  report.add("isolated_check_bytes_always", *bytes_always);
  report.add("state_container_bytes", state_bytes);
  report.add("isolated_check_vs_state",
             static_cast<double>(*bytes_auto) / static_cast<double>(state_bytes));
  report.add("second_replay_seconds", second->second_seconds);
  report.add("second_replay_in_worker_seconds", second->second_replay_alone);
  report.add("isolated_check_seconds", second->check_seconds);
  report.add("second_replay_vs_check", second->second_seconds / second->check_seconds);
  report.add("isolated_check_always_vs_state",
             static_cast<double>(*bytes_always) / static_cast<double>(state_bytes));
  return 0;
}
