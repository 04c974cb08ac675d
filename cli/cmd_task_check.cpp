// `veritrain task check TASK`: the pre-flight a requestor runs before publishing a task. The
// model must fit the data (one forward pass, shapes and classes), and training must replay: a
// few steps from a snapshot, in a fresh process, must land on the bytes the first process
// reached. A model that fails here would get an honest provider rejected.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <sstream>

#include "cli/app.h"
#include "cli/task_fields.h"
#include "common/file_io.h"
#include "common/process.h"
#include "common/safetensors.h"
#include "common/sha256.h"
#include "protocol/environment.h"
#include "training/environment.h"
#include "training/runtime.h"
#include "training/sizes.h"
#include "training/trainer.h"
#include "training/zoo.h"

namespace vt::cli {
namespace {
namespace fs = std::filesystem;

// The task cut to epochs of `steps` steps: what both processes train.
Result<Task> short_task(const std::string& path, std::int64_t steps) {
  VT_ASSIGN_OR_RETURN(Task task, load_task(path));
  task.epochs = 2;
  task.steps_per_epoch = steps;
  return task;
}

// True when the task trains on CUDA and this machine has none: the check then runs on the CPU
// (a requestor writes the task on its own machine; the state a snapshot holds is the same).
bool checked_on_cpu_instead(const Task& task) {
  return task.device == Device::kCuda && !training::runtime_info().cuda_available;
}

training::TrainerOptions options_for(const std::string& task_path, const Task& task) {
  training::TrainerOptions o;
  o.task_dir = fs::path(task_path).parent_path();
  if (checked_on_cpu_instead(task)) o.device = "cpu";
  return o;
}

// Tensors whose bytes differ between two snapshots of one layout, by name.
std::string differing_tensors(const Bytes& a, const Bytes& b) {
  auto va = parse_safetensors(a);
  auto vb = parse_safetensors(b);
  if (!va || !vb) return "(unreadable snapshot)";
  std::string names;
  int shown = 0;
  for (const TensorEntry& e : va->tensors) {
    const TensorEntry* f = vb->find(e.name);
    const bool same = f != nullptr && f->shape == e.shape && f->dtype == e.dtype &&
                      std::ranges::equal(va->data(e), vb->data(*f));
    if (same) continue;
    if (shown++ >= 4) continue;
    if (!names.empty()) names += ", ";
    names += e.name;
  }
  if (shown > 4) names += " and " + std::to_string(shown - 4) + " more";
  return names.empty() ? "(metadata only)" : names;
}

// Starts `veritrain task check-steps-worker ...` (this binary); finish() waits for it.
Result<ChildProcess> spawn_self(const std::vector<std::string>& args, const fs::path& log) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return io_error("task check: cannot find this program's own file: " + ec.message());
  std::vector<std::string> argv{self.string(), "--log-level", "error", "task",
                                "check-steps-worker"};
  argv.insert(argv.end(), args.begin(), args.end());
  return ChildProcess::spawn(argv, log);
}

// The child's exit; a failure carries the last line it wrote (its error message).
Status finish(ChildProcess& child, const fs::path& log) {
  const int code = child.wait();
  if (code == 0) return {};
  std::string said;
  if (auto text = read_text_file(log, 1 << 16)) {
    std::istringstream in(*text);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty()) said = line;
    }
  }
  const std::string prefix = "veritrain: error: ";
  if (said.rfind(prefix, 0) == 0) said = said.substr(prefix.size());
  return Error{code == 2 ? Errc::kInvalidInput : Errc::kInternal,
               "task check: the training run failed: " + said};
}

}  // namespace

void register_task_check(CLI::App* task, Context& ctx) {
  struct Args {
    std::string task, from, out1, out2;
    std::int64_t steps = 3;
  };
  auto a = std::make_shared<Args>();
  auto* check = task->add_subcommand("check", summary_of("task check"));
  check->add_option("task", a->task, "task.json")->required();
  check->add_option("--steps", a->steps, "Steps per run (at most one epoch)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  check->callback([&ctx, a] {
    ctx.action = [&ctx, a]() -> Result<int> {
      const auto start = std::chrono::steady_clock::now();
      VT_ASSIGN_OR_RETURN(Task t, load_task(a->task));
      if (Status fit = training::validate_for_training(t); !fit)
        return fit.error().context(a->task);
      if (Status ours = training::implements_portable_arithmetic(t); !ours)
        return ours.error().context(a->task);
      // Short epochs: the task's own if shorter (epoch_order makes more passes if needed).
      const std::int64_t steps =
          t.steps_per_epoch > 0 ? std::min(a->steps, t.steps_per_epoch) : a->steps;
      const fs::path scratch =
          fs::temp_directory_path() / ("veritrain-check-" + std::to_string(::getpid()));
      fs::create_directories(scratch);
      struct Cleanup {
        fs::path dir;
        ~Cleanup() {
          std::error_code ec;
          fs::remove_all(dir, ec);
        }
      } cleanup{scratch};
      const std::string n = std::to_string(steps);
      // The whole task's trainer first: its sizes are checked against the data and this
      // machine before anything runs (the children train short epochs). First process: epoch
      // 0 -> A -> B, started beside the shape check here. Second: restore A, train -> B'.
      // B' == B or the task does not replay (state outside the snapshot, randomness outside its
      // generators).
      std::vector<TensorEntry> layout;
      std::int64_t epoch_steps = 0;
      {
        VT_ASSIGN_OR_RETURN(auto trainer, training::Trainer::create(t, options_for(a->task, t)));
        layout = trainer->layout();
        epoch_steps = trainer->steps_per_epoch();
        VT_ASSIGN_OR_RETURN(ChildProcess first_run,
                            spawn_self({a->task, "--steps", n, "--out1", (scratch / "a").string(),
                                        "--out2", (scratch / "b").string()},
                                       scratch / "first.log"));
        VT_RETURN_IF_ERROR(trainer->check_model());
        VT_RETURN_IF_ERROR(finish(first_run, scratch / "first.log"));
      }
      VT_ASSIGN_OR_RETURN(ChildProcess second_run,
                          spawn_self({a->task, "--steps", n, "--from", (scratch / "a").string(),
                                      "--out2", (scratch / "b2").string()},
                                     scratch / "second.log"));
      VT_RETURN_IF_ERROR(finish(second_run, scratch / "second.log"));
      VT_ASSIGN_OR_RETURN(Bytes first, read_file(scratch / "b"));
      VT_ASSIGN_OR_RETURN(Bytes second, read_file(scratch / "b2"));
      if (first != second) {
        // veritrain's own executor is fixed (docs/training.md), so what is left is the
        // module's: the causes in the order they turn up in real modules.
        return invalid_input(
            a->task + ": not replayable: " + n +
            " steps from one snapshot gave different states in two processes (differing: " +
            differing_tensors(first, second) +
            "). A verifier would reject an honest provider. Likely causes, most likely first: "
            "(1) a tensor attribute that is neither a parameter nor a buffer and that forward() "
            "changes in place (register it with register_buffer, so that snapshots hold it); "
            "(2) randomness drawn outside torch's generators (Python's random, the clock, a "
            "counter); (3) an operator whose result depends on thread timing (scatter_add_ or "
            "index_add_ with repeated indices; try the task with intra_op_threads 1). If none "
            "applies, the fault is veritrain's: please report it with this task and module.");
      }
      // Last, as `train` checks it before epoch 0: every commitment must fit one record.
      VT_RETURN_IF_ERROR(training::check_fingerprint_sizes(t, epoch_steps, layout));
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string digest = hex_encode(sha256(first));
      std::ostringstream human;
      human << "ok: the model fits the data, and " << steps
            << " steps replay bit for bit in a fresh process"
            << " (state sha256 " << digest.substr(0, 16) << "..., " << secs << " s)\n";
      const std::string warning =
          exact_mode_warning(t, training::replayable_environments(t, options_for(a->task, t)));
      if (!warning.empty()) human << "warning: " << warning << "\n";
      const bool on_cpu = checked_on_cpu_instead(t);
      if (on_cpu) {
        human << "note: checked on the CPU: this machine has no CUDA, and the task trains on "
                 "a GPU\n";
      }
      emit(ctx,
           {{"ok", true},
            {"steps", steps},
            {"state_sha256", digest},
            {"seconds", secs},
            {"device", on_cpu ? "cpu" : name_string(t.device)},
            {"warnings",
             warning.empty() ? nlohmann::json::array() : nlohmann::json::array({warning})}},
           human.str());
      return 0;
    };
  });

  // The worker of `task check`: not for people, so not listed in --help.
  auto* steps = task->add_subcommand("check-steps-worker", "")->group("");
  steps->add_option("task", a->task)->required();
  steps->add_option("--steps", a->steps)->required();
  steps->add_option("--from", a->from);
  steps->add_option("--out1", a->out1);
  steps->add_option("--out2", a->out2)->required();
  steps->callback([&ctx, a] {
    ctx.action = [a]() -> Result<int> {
      VT_ASSIGN_OR_RETURN(Task t, short_task(a->task, a->steps));
      std::unique_ptr<training::Trainer> trainer;
      if (a->from.empty()) {
        VT_ASSIGN_OR_RETURN(trainer, training::Trainer::create(t, options_for(a->task, t)));
        VT_RETURN_IF_ERROR(trainer->train_epoch());
        VT_ASSIGN_OR_RETURN(Bytes first, trainer->snapshot());
        VT_RETURN_IF_ERROR(write_file_atomic(a->out1, first));
      } else {
        VT_ASSIGN_OR_RETURN(Bytes from, read_file(a->from));
        VT_ASSIGN_OR_RETURN(trainer, training::Trainer::restore(t, from, options_for(a->task, t)));
      }
      VT_RETURN_IF_ERROR(trainer->train_epoch());
      VT_ASSIGN_OR_RETURN(Bytes second, trainer->snapshot());
      VT_RETURN_IF_ERROR(write_file_atomic(a->out2, second));
      return 0;
    };
  });
}

}  // namespace vt::cli
