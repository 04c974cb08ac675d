// `veritrain task check TASK`: the pre-flight a requestor runs before publishing a task. The
// model must fit the data (one forward pass, shapes and classes), and training must reproduce:
// the task's first steps, trained in two fresh processes (the second with its memory scrambled),
// must reach the same initial state and the same state after them, and a few steps more from a
// snapshot must land on the same bytes. A model that fails here would have an honest provider's
// epochs left unjudged.
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
#include "fingerprint/merkle.h"
#include "protocol/environment.h"
#include "training/environment.h"
#include "training/runtime.h"
#include "training/trainer.h"
#include "training/zoo/sizes.h"
#include "training/zoo/zoo.h"

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

// Tensors whose bytes differ between two snapshots of one layout, by name, first first.
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
Result<ChildProcess> spawn_self(const std::vector<std::string>& args, const fs::path& log,
                                const std::vector<std::string>& env = {}) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return io_error("task check: cannot find this program's own file: " + ec.message());
  std::vector<std::string> argv{self.string(), "--log-level", "error", "task",
                                "check-steps-worker"};
  argv.insert(argv.end(), args.begin(), args.end());
  return ChildProcess::spawn(argv, log, -1, env);
}

// What a difference between two runs of the check means, first cause first.
constexpr const char* kNondeterministic =
    "A verifier could judge none of its epochs, and an honest provider would not be paid. Likely "
    "causes: (1) a nondeterministic operator: one that reads memory it never wrote "
    "(torch.empty, new_empty, an out= tensor read before it is written) or whose result depends "
    "on thread timing (scatter_add_, index_add_ or index_put_(accumulate=True) with repeated "
    "indices: try the task with intra_op_threads 1); (2) randomness drawn outside torch's "
    "generators (Python's random, the clock, a counter). If none applies, the fault is "
    "veritrain's: please report it with this task and module.";
constexpr const char* kStateOutsideSnapshot =
    "A verifier replays an epoch from its snapshot alone, so it would not reach the provider's "
    "bits. Likely causes: (1) a tensor attribute that is neither a parameter nor a buffer and "
    "that forward() changes in place (register it with register_buffer, so that snapshots hold "
    "it); (2) randomness drawn outside torch's generators (Python's random, the clock, a "
    "counter). If none applies, the fault is veritrain's: please report it with this task and "
    "module.";

// Two states that must be the same bytes; a rejection naming the first tensor that differs.
Status same_state(const fs::path& first, const fs::path& second, const std::string& what,
                  const char* causes, const std::string& task_file) {
  VT_ASSIGN_OR_RETURN(Bytes a, read_file(first));
  VT_ASSIGN_OR_RETURN(Bytes b, read_file(second));
  if (a == b) return {};
  return rejected(task_file + ": not reproducible: " + what + " (roots " +
                  hex_encode(fp::merkle_root(a)).substr(0, 16) + "... and " +
                  hex_encode(fp::merkle_root(b)).substr(0, 16) +
                  "...; differing: " + differing_tensors(a, b) + "). " + causes);
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
    std::string task, from, out0, out1, out2, out_replay;
    std::int64_t steps = 4;
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
      auto file = [&](const char* name) { return (scratch / name).string(); };
      // The whole task's trainer first: its sizes are checked against the data and this
      // machine before anything runs (the children train short epochs of `steps`). First
      // process: the initial state, N steps -> A, N more -> B, started beside the shape check
      // here. Second, its memory scrambled: the initial state and N steps again (-> A'), then a
      // fresh trainer restored from A trains N steps (-> B'). A' == A or the task's arithmetic
      // changes from run to run; B' == B or the snapshot leaves something out.
      std::vector<TensorEntry> layout;
      std::int64_t epoch_steps = 0;
      {
        VT_ASSIGN_OR_RETURN(auto trainer, training::Trainer::create(t, options_for(a->task, t)));
        layout = trainer->layout();
        epoch_steps = trainer->steps_per_epoch();
        VT_ASSIGN_OR_RETURN(ChildProcess first_run,
                            spawn_self({a->task, "--steps", n, "--out0", file("s0"), "--out1",
                                        file("a"), "--out2", file("b")},
                                       scratch / "first.log"));
        VT_RETURN_IF_ERROR(trainer->check_model());
        VT_RETURN_IF_ERROR(finish(first_run, scratch / "first.log"));
      }
      VT_ASSIGN_OR_RETURN(
          ChildProcess second_run,
          spawn_self({a->task, "--steps", n, "--out0", file("s0-again"), "--out1", file("a-again"),
                      "--from", file("a"), "--out-replay", file("b-replayed")},
                     scratch / "second.log", scrambled_memory_environment()));
      VT_RETURN_IF_ERROR(finish(second_run, scratch / "second.log"));
      VT_RETURN_IF_ERROR(same_state(file("s0"), file("s0-again"),
                                    "the initial state differs between two fresh processes",
                                    kNondeterministic, a->task));
      VT_RETURN_IF_ERROR(same_state(file("a"), file("a-again"),
                                    "the first " + n +
                                        " steps, trained in two fresh processes (the second with "
                                        "its memory scrambled), reach different states",
                                    kNondeterministic, a->task));
      VT_RETURN_IF_ERROR(same_state(file("b"), file("b-replayed"),
                                    n + " steps replayed from a snapshot in a fresh process "
                                        "reach another state than the run that wrote it",
                                    kStateOutsideSnapshot, a->task));
      VT_ASSIGN_OR_RETURN(Bytes first, read_file(file("b")));
      // Last, as `train` checks it before epoch 0: every commitment must fit one record.
      VT_RETURN_IF_ERROR(training::check_fingerprint_sizes(t, epoch_steps, layout));
      const double secs =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const std::string digest = hex_encode(sha256(first));
      std::ostringstream human;
      human << "ok: the model fits the data; " << steps << " + " << steps
            << " steps train to the same bits in two fresh processes (one with its memory "
               "scrambled) and replay bit for bit from a snapshot"
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

  // The worker of `task check`: not for people, so not listed in --help. Trains the short task
  // from its start, writing the state at its start (--out0) and after each epoch of --steps
  // (--out1, and --out2 for a second one); then, with --from, restores that state in a fresh
  // trainer and writes the state one epoch later (--out-replay).
  auto* steps = task->add_subcommand("check-steps-worker", "")->group("");
  steps->add_option("task", a->task)->required();
  steps->add_option("--steps", a->steps)->required();
  steps->add_option("--out0", a->out0)->required();
  steps->add_option("--out1", a->out1)->required();
  steps->add_option("--out2", a->out2);
  steps->add_option("--from", a->from);
  steps->add_option("--out-replay", a->out_replay);
  steps->callback([&ctx, a] {
    ctx.action = [a]() -> Result<int> {
      VT_ASSIGN_OR_RETURN(Task t, short_task(a->task, a->steps));
      {
        VT_ASSIGN_OR_RETURN(auto trainer, training::Trainer::create(t, options_for(a->task, t)));
        VT_ASSIGN_OR_RETURN(Bytes initial, trainer->snapshot());
        VT_RETURN_IF_ERROR(write_file_atomic(a->out0, initial));
        VT_RETURN_IF_ERROR(trainer->train_epoch());
        VT_ASSIGN_OR_RETURN(Bytes first, trainer->snapshot());
        VT_RETURN_IF_ERROR(write_file_atomic(a->out1, first));
        if (!a->out2.empty()) {
          VT_RETURN_IF_ERROR(trainer->train_epoch());
          VT_ASSIGN_OR_RETURN(Bytes second, trainer->snapshot());
          VT_RETURN_IF_ERROR(write_file_atomic(a->out2, second));
        }
      }
      if (a->from.empty()) return 0;
      // One trainer at a time: LibTorch's generators and thread count are the process's.
      VT_ASSIGN_OR_RETURN(Bytes from, read_file(a->from));
      VT_ASSIGN_OR_RETURN(auto restored,
                          training::Trainer::restore(t, from, options_for(a->task, t)));
      VT_RETURN_IF_ERROR(restored->train_epoch());
      VT_ASSIGN_OR_RETURN(Bytes replayed, restored->snapshot());
      VT_RETURN_IF_ERROR(write_file_atomic(a->out_replay, replayed));
      return 0;
    };
  });
}

}  // namespace vt::cli
