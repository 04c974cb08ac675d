// `veritrain train`: run a task as a provider, committing every epoch.
#include <spdlog/spdlog.h>

#include <filesystem>
#include <iostream>
#include <sstream>

#include "cli/app.h"
#include "cli/progress.h"
#include "cli/service.h"
#include "cli/train_ranks.h"
#include "common/text.h"
#include "protocol/task.h"
#include "provider/provider.h"
#include "provider/ranks.h"
#include "provider/workdir/workdir.h"

namespace vt::cli {

namespace {

struct TrainArgs {
  std::string task, workdir, key, device;
  int full_every = 4;
  std::int64_t threads = 0;
  bool checkpoint_activations = false;
  std::string commit_mode = "auto";
};

// What `train` prints when it is done: the summary line for --json, and for people.
void say_summary(Context& ctx, const Task& task, const TrainArgs& a,
                 const provider::ProviderSummary& s) {
  nlohmann::json j = {{"message_type", "summary"},
                      {"task_id", hex_encode(task_id(task))},
                      {"epochs_committed", s.epochs_committed},
                      {"resumed_from_epoch", s.resumed_from},
                      {"final_root", hex_encode(s.final_root)},
                      {"disk_bytes", s.disk_bytes},
                      {"train_seconds", s.train_seconds},
                      {"total_seconds", s.total_seconds},
                      {"workdir", a.workdir}};
  std::ostringstream human;
  if (s.resumed_from > static_cast<std::uint64_t>(task.epochs)) {
    human << "nothing to train: " << a.workdir << " already holds every epoch of the task ("
          << count_text(static_cast<double>(task.epochs), "epoch") << ")\nfinal root "
          << hex_encode(s.final_root) << "\n";
  } else {
    human << "trained " << count_text(static_cast<double>(task.epochs), "epoch") << "; "
          << count_text(static_cast<double>(s.epochs_committed), "commitment") << " in "
          << a.workdir << "\nfinal root " << hex_encode(s.final_root) << "\nstored "
          << size_text(static_cast<double>(s.disk_bytes)) << "; training " << s.train_seconds
          << " s of " << s.total_seconds << " s\n";
  }
  emit(ctx, j, human.str());
}

Result<int> run_train(Context& ctx, const TrainArgs& args, ServeArgs& serve,
                      const RankArgs& ranks) {
  VT_ASSIGN_OR_RETURN(Task task, load_task(args.task));
  if (args.threads > 0 && args.threads != task.intra_op_threads &&
      task.determinism == Determinism::kExact) {
    return invalid_input("--threads " + std::to_string(args.threads) +
                         ": an exact-mode task's bits depend on its thread count (" +
                         std::to_string(task.intra_op_threads) +
                         "); --threads is for portable and tolerance tasks");
  }
  VT_ASSIGN_OR_RETURN(RankPlan plan, plan_ranks(ranks, task));
  if (plan.launch > 1) return launch_local_ranks(plan);
  std::shared_ptr<training::Collective> collective;  // several ranks: rank 0 goes on below
  if (plan.join.world_size > 1) {
    VT_ASSIGN_OR_RETURN(collective, training::Collective::connect(plan.join));
    if (collective->rank() != 0)
      return run_follower_rank(task, args.task, args.device, args.checkpoint_activations,
                               collective);
  }
  Service service;
  auto gauges = std::make_shared<TrainMetrics>(task.epochs);
  TrainInterrupts interrupts(task.epochs, args.workdir);
  if (!serve.listen.empty()) {
    VT_RETURN_IF_ERROR(provider::Workdir::open_for(args.workdir, task));
    serve.key_dir = args.key;     // the certificate keygen made beside the signing key
    serve.task_file = args.task;  // trace answers replay this task, its data beside it
    VT_ASSIGN_OR_RETURN(service, start_service(args.workdir, serve, gauges));
  } else if (!serve.metrics.empty()) {
    VT_ASSIGN_OR_RETURN(service.metrics, start_metrics(serve.metrics, nullptr, gauges));
  }
  Progress progress(ctx.json, task.epochs);
  provider::ProviderOptions o;
  o.workdir = args.workdir;
  o.key_dir = args.key;
  o.task_dir = std::filesystem::path(args.task).parent_path();
  o.device = args.device;
  o.intra_op_threads = args.threads;
  o.checkpoint_activations = args.checkpoint_activations;
  o.full_every = args.full_every;
  o.commit_mode = args.commit_mode == "stream"    ? provider::CommitMode::kStream
                  : args.commit_mode == "overlap" ? provider::CommitMode::kOverlap
                                                  : provider::CommitMode::kAuto;
  o.on_step = [&](const training::StepMetrics& m) {
    gauges->step(m.epoch, m.step_in_epoch, m.steps_in_epoch, m.loss, m.samples_per_second);
    progress.step(m);
  };
  o.on_commit = [&](const provider::CommitEvent& e) {
    interrupts.committed(static_cast<std::int64_t>(e.epoch));
    gauges->committed(e.epoch);
    progress.committed(e);
    if (service.server) service.server->notify_commit(e.epoch);
  };
  o.on_notice = [&](const std::string& n) { progress.notice(n); };
  if (collective) provider::attach_rank0(o, collective);
  // A resumed run starts from a committed epoch: an interrupt before the next names it.
  o.on_start = [&interrupts, inner = o.on_start](const training::Trainer& t) -> Status {
    if (t.epoch() > 0) interrupts.committed(t.epoch());
    return inner ? inner(t) : Status{};
  };
  VT_ASSIGN_OR_RETURN(provider::ProviderSummary s, provider::run_provider(task, o));
  if (collective) VT_RETURN_IF_ERROR(collective->finish());
  say_summary(ctx, task, args, s);
  interrupts.trained();
  if (service.server) {
    spdlog::info("training done; still serving until interrupted (Ctrl-C)");
    interrupts.serve_until_interrupted();
  }
  return 0;
}

}  // namespace

void register_train(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("train", summary_of("train"));
  auto a = std::make_shared<TrainArgs>();
  auto serve = std::make_shared<ServeArgs>();
  auto ranks = std::make_shared<RankArgs>();
  cmd->add_option("--task", a->task, "task.json")->required();
  cmd->add_option("--workdir", a->workdir,
                  "Folder for the log, snapshots and keys (resumed if it exists)")
      ->required();
  cmd->add_option("--key", a->key,
                  "Key folder (veritrain keygen); default: the workdir's own keys");
  cmd->add_option("--device", a->device, "cpu, cuda or cuda:N (default: the task's)");
  cmd->add_option("--threads", a->threads,
                  "Intra-op threads for a portable or tolerance task (default: the task's); an "
                  "exact task's bits depend on the task's own count")
      ->check(CLI::Range(1, 4096));
  cmd->add_flag("--checkpoint-activations", a->checkpoint_activations,
                "Recompute each block's activations in the backward pass instead of keeping them "
                "(the zoo's gpt): less memory, a second forward's time, the same bits");
  cmd->add_option("--full-every", a->full_every,
                  "Store a whole snapshot every N epochs, deltas between")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  cmd->add_option("--commit-mode", a->commit_mode,
                  "stream: each epoch's state read out of the live tensors through hashing and "
                  "coding while training waits (no copy in memory); overlap: a copy committed "
                  "while the next epoch trains; auto: stream CPU states of 256 MiB or more")
      ->check(CLI::IsMember({"auto", "stream", "overlap"}))
      ->capture_default_str();
  add_serve_options(cmd, *serve, /*listen_required=*/false);
  add_rank_options(cmd, *ranks);
  cmd->callback([&ctx, a, serve, ranks] {
    ctx.action = [&ctx, a, serve, ranks] { return run_train(ctx, *a, *serve, *ranks); };
  });
}

}  // namespace vt::cli
