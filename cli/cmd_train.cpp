// `veritrain train`: run a task as a provider, committing every epoch.
#include <spdlog/spdlog.h>

#include <atomic>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <thread>

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

void register_train(CLI::App& app, Context& ctx) {
  auto* cmd = app.add_subcommand("train", summary_of("train"));
  struct Args {
    std::string task, workdir, key, device;
    int full_every = 4;
    std::int64_t threads = 0;
  };
  auto a = std::make_shared<Args>();
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
  cmd->add_option("--full-every", a->full_every,
                  "Store a whole snapshot every N epochs, deltas between")
      ->check(CLI::Range(1, 1000000))
      ->capture_default_str();
  add_serve_options(cmd, *serve, /*listen_required=*/false);
  add_rank_options(cmd, *ranks);
  cmd->callback([&ctx, a, serve, ranks] {
    ctx.action = [&ctx, a, serve, ranks]() -> Result<int> {
      VT_ASSIGN_OR_RETURN(Task task, load_task(a->task));
      if (a->threads > 0 && a->threads != task.intra_op_threads &&
          task.determinism == Determinism::kExact) {
        return invalid_input("--threads " + std::to_string(a->threads) +
                             ": an exact-mode task's bits depend on its thread count (" +
                             std::to_string(task.intra_op_threads) +
                             "); --threads is for portable and tolerance tasks");
      }
      VT_ASSIGN_OR_RETURN(RankPlan plan, plan_ranks(*ranks, task));
      if (plan.launch > 1) return launch_local_ranks(plan);
      std::shared_ptr<training::Collective> collective;  // several ranks: rank 0 goes on below
      if (plan.join.world_size > 1) {
        VT_ASSIGN_OR_RETURN(collective, training::Collective::connect(plan.join));
        if (collective->rank() != 0) return run_follower_rank(task, a->task, a->device, collective);
      }
      Service service;
      auto gauges = std::make_shared<TrainMetrics>(task.epochs);
      // Set once every epoch is committed: from then on the process only serves, and an
      // interrupt is how it is meant to end. Everything on disk is crash-safe, so an interrupt
      // may simply end the process, saying what is committed; a later `train` resumes after the
      // last durable commitment.
      static std::atomic<bool> trained{false};
      static std::atomic<std::int64_t> last_committed{-1};
      static std::string interrupted_text;
      interrupted_text = " of " + std::to_string(task.epochs) + " is committed in " + a->workdir +
                         "; run the same command to go on from there\n";
      block_termination_signals();
      std::thread([] {
        wait_for_termination_signal();
        if (trained.load()) {
          std::cerr << "\nveritrain: stopped serving; training had finished\n";
          std::_Exit(0);
        }
        const std::int64_t last = last_committed.load();
        std::cerr << "\nveritrain: interrupted; "
                  << (last < 0 ? std::string("no epoch") : "epoch " + std::to_string(last))
                  << interrupted_text;
        std::_Exit(130);
      }).detach();
      if (!serve->listen.empty()) {
        VT_RETURN_IF_ERROR(provider::Workdir::open_for(a->workdir, task));
        serve->key_dir = a->key;     // the certificate keygen made beside the signing key
        serve->task_file = a->task;  // trace answers replay this task, its data beside it
        VT_ASSIGN_OR_RETURN(service, start_service(a->workdir, *serve, gauges));
      } else if (!serve->metrics.empty()) {
        VT_ASSIGN_OR_RETURN(service.metrics, start_metrics(serve->metrics, nullptr, gauges));
      }
      Progress progress(ctx.json, task.epochs);
      provider::ProviderOptions o;
      o.workdir = a->workdir;
      o.key_dir = a->key;
      o.task_dir = std::filesystem::path(a->task).parent_path();
      o.device = a->device;
      o.intra_op_threads = a->threads;
      o.full_every = a->full_every;
      o.on_step = [&](const training::StepMetrics& m) {
        gauges->step(m.epoch, m.step_in_epoch, m.steps_in_epoch, m.loss, m.samples_per_second);
        progress.step(m);
      };
      o.on_commit = [&](const provider::CommitEvent& e) {
        last_committed.store(static_cast<std::int64_t>(e.epoch));
        gauges->committed(e.epoch);
        progress.committed(e);
        if (service.server) service.server->notify_commit(e.epoch);
      };
      o.on_notice = [&](const std::string& n) { progress.notice(n); };
      if (collective) provider::attach_rank0(o, collective);
      // A resumed run starts from a committed epoch: an interrupt before the next names it.
      o.on_start = [inner = o.on_start](const training::Trainer& t) -> Status {
        if (t.epoch() > 0) last_committed.store(t.epoch());
        return inner ? inner(t) : Status{};
      };
      VT_ASSIGN_OR_RETURN(provider::ProviderSummary s, provider::run_provider(task, o));
      if (collective) VT_RETURN_IF_ERROR(collective->finish());
      nlohmann::json j = {{"message_type", "summary"},
                          {"task_id", hex_encode(task_id(task))},
                          {"epochs_committed", s.epochs_committed},
                          {"resumed_from_epoch", s.resumed_from},
                          {"final_root", hex_encode(s.final_root)},
                          {"disk_bytes", s.disk_bytes},
                          {"train_seconds", s.train_seconds},
                          {"total_seconds", s.total_seconds},
                          {"workdir", a->workdir}};
      std::ostringstream human;
      if (s.resumed_from > static_cast<std::uint64_t>(task.epochs)) {
        human << "nothing to train: " << a->workdir << " already holds every epoch of the task ("
              << count_text(static_cast<double>(task.epochs), "epoch") << ")\nfinal root "
              << hex_encode(s.final_root) << "\n";
      } else {
        human << "trained " << count_text(static_cast<double>(task.epochs), "epoch") << "; "
              << count_text(static_cast<double>(s.epochs_committed), "commitment") << " in "
              << a->workdir << "\nfinal root " << hex_encode(s.final_root) << "\nstored "
              << size_text(static_cast<double>(s.disk_bytes)) << "; training " << s.train_seconds
              << " s of " << s.total_seconds << " s\n";
      }
      emit(ctx, j, human.str());
      trained.store(true);
      if (service.server) {
        spdlog::info("training done; still serving until interrupted (Ctrl-C)");
        while (true) std::this_thread::sleep_for(std::chrono::hours(1));
      }
      return 0;
    };
  });
}

}  // namespace vt::cli
