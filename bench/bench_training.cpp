// Training throughput and what snapshots cost beside it, per zoo model. One run per
// model: epoch 1 warms up (allocator, caches), epochs 2..E are timed, a snapshot is captured
// after every epoch as the provider does, then the state of epoch E-1 is restored (the trainer
// of the run is destroyed first: LibTorch settings are process-wide) and epoch E replayed.
//
//   train_steps_per_s_<m>          optimizer steps per second over the timed epochs
//   snapshot_capture_ms_<m>        Trainer::snapshot() (canonical bytes), best of the captures
//   capture_fraction_of_epoch_<m>  capture time / mean timed epoch time, same run
//   snapshot_bytes_<m>             size of the canonical bytes
//   replay_vs_train_ratio_<m>      steps/s of restore + replayed epoch E over steps/s of the
//                                  original epoch E (the verifier pays the restore too)
//   replay_identical_<m>           the replay landed on the original bytes (a sanity check)
//
// With --recipes a second trainer runs the task with docs/task.md's recipes on (the gradient's l2
// norm clipped at 1, the 1-d parameters spared decay, labels smoothed by 0.1, a moving average of
// the weights with decay 0.999; for the cnn also a crop from the image padded by 4 and flips), its
// epochs alternating with a plain trainer's so that the machine's drift falls on both (one warm-up
// epoch each, then --epochs rounds):
//   recipes_vs_plain_steps_ratio_<m>  median plain epoch time over median recipe epoch time
//
//   bench_training [--json] [--model cnn|gpt|all] [--width N] [--d-model N] [--steps N]
//                  [--epochs E] [--threads N] [--portable] [--recipes]

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "training/recipes.h"
#include "training/trainer.h"
#include "training/zoo/zoo.h"

namespace {

using vt::bench::seconds_since;
using Clock = std::chrono::steady_clock;

struct Args {
  std::string model = "all";
  std::int64_t width = 32;     // cnn: ~0.3M parameters, a few seconds per epoch on one core
  std::int64_t d_model = 128;  // gpt: ~0.5M parameters with the layers below
  std::int64_t steps = 8;
  std::int64_t epochs = 3;   // >= 3: one warm-up, at least two timed
  std::int64_t threads = 1;  // the task's intra-op threads
  bool portable = false;
  bool recipes = false;
};

std::optional<int> parse(int argc, char** argv, Args& a) {
  CLI::App app{"bench_training: samples/s per model, and a replay against its training"};
  app.add_option("--model", a.model, "cnn, gpt or all")
      ->check(CLI::IsMember({"cnn", "gpt", "all"}));
  app.add_option("--width", a.width, "cnn width")->check(CLI::PositiveNumber);
  app.add_option("--d-model", a.d_model, "gpt width")->check(CLI::PositiveNumber);
  app.add_option("--steps", a.steps, "Steps per epoch")->check(CLI::PositiveNumber);
  app.add_option("--epochs", a.epochs, "Epochs (one warm-up, at least two timed)")
      ->check(CLI::Range(3, 1 << 20));
  app.add_option("--threads", a.threads, "The task's intra-op threads")->check(CLI::PositiveNumber);
  app.add_flag("--portable", a.portable, "Portable arithmetic rather than LibTorch's (exact)");
  app.add_flag("--recipes", a.recipes, "Also train with the recipes on, and compare");
  return vt::bench::parse_flags(app, argc, argv);
}

vt::Result<vt::Task> make_task(const std::string& model, const Args& a) {
  VT_ASSIGN_OR_RETURN(vt::Task task, vt::training::default_task(model, "synthetic"));
  task.epochs = a.epochs;
  task.steps_per_epoch = a.steps;
  task.intra_op_threads = a.threads;
  task.determinism = a.portable ? vt::Determinism::kPortable : vt::Determinism::kExact;
  // AdamW: its two moments make the snapshot three times the weights, as in real jobs.
  task.optimizer = {.name = "adamw", .lr = 1e-3, .weight_decay = 0.01};
  if (model == "cnn") {
    task.model.options = {{"width", a.width}, {"blocks", 1}, {"classes", 10}};
    task.batch_size = 32;
  } else {
    task.model.options = {{"vocab", 256},         {"d_model", a.d_model}, {"layers", 2},
                          {"heads", 4},           {"seq_len", 64},        {"mlp_ratio", 4},
                          {"dropout_permille", 0}};
    task.batch_size = 16;
  }
  task.dataset.options = {{"samples", a.steps * task.batch_size}};
  VT_RETURN_IF_ERROR(vt::training::validate_for_training(task));
  return task;
}

struct Figures {
  std::int64_t params = 0;
  double steps_per_s = 0, capture_s = 1e300, epoch_s = 0, replay_ratio = 0;
  std::uint64_t snapshot_bytes = 0;
  bool identical = false;
};

// The recipes on `task`: nanoGPT's clipping and decay groups, smoothed labels, a moving average
// of the weights, and the CIFAR-10 augmentation for the cnn.
vt::Result<vt::Task> with_recipes(vt::Task task) {
  using vt::training::Trainer;
  VT_ASSIGN_OR_RETURN(auto probe, Trainer::create(task));
  VT_ASSIGN_OR_RETURN(task.optimizer.no_decay,
                      vt::training::resolve_no_decay("1d", probe->parameter_info()));
  task.optimizer.clip_grad_norm = 1.0;
  task.loss_options.label_smoothing = 0.1;
  task.optimizer.ema_decay = 0.999;
  if (task.model.name == "cnn") task.dataset.augment = {4, "zero", true};
  VT_RETURN_IF_ERROR(vt::training::validate_for_training(task));
  return task;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

vt::Result<double> recipes_ratio(const vt::Task& plain, const vt::Task& recipe) {
  using vt::training::Trainer;
  VT_ASSIGN_OR_RETURN(auto a, Trainer::create(plain));
  VT_ASSIGN_OR_RETURN(auto b, Trainer::create(recipe));
  VT_RETURN_IF_ERROR(a->train_epoch());
  VT_RETURN_IF_ERROR(b->train_epoch());
  std::vector<double> plain_s, recipe_s;
  for (std::int64_t round = 1; round < plain.epochs; ++round) {
    auto t = Clock::now();
    VT_RETURN_IF_ERROR(a->train_epoch());
    plain_s.push_back(seconds_since(t));
    t = Clock::now();
    VT_RETURN_IF_ERROR(b->train_epoch());
    recipe_s.push_back(seconds_since(t));
  }
  return median(plain_s) / median(recipe_s);
}

vt::Result<Figures> measure(const vt::Task& task) {
  using vt::training::Trainer;
  Figures f;
  vt::Bytes before_last, last;
  double last_epoch_s = 0, timed_s = 0;
  {
    VT_ASSIGN_OR_RETURN(auto trainer, Trainer::create(task));
    f.params = trainer->parameter_count();
    for (std::int64_t e = 1; e <= task.epochs; ++e) {
      auto t = Clock::now();
      VT_RETURN_IF_ERROR(trainer->train_epoch());
      const double epoch_s = seconds_since(t);
      t = Clock::now();
      VT_ASSIGN_OR_RETURN(vt::Bytes snap, trainer->snapshot());
      const double capture_s = seconds_since(t);
      if (e > 1) {  // epoch 1 pays for first-touch allocations
        timed_s += epoch_s;
        f.capture_s = std::min(f.capture_s, capture_s);
      }
      last_epoch_s = epoch_s;
      before_last = std::move(last);
      last = std::move(snap);
    }
  }
  const double timed_epochs = static_cast<double>(task.epochs - 1);
  f.epoch_s = timed_s / timed_epochs;
  f.steps_per_s = static_cast<double>(task.steps_per_epoch) * timed_epochs / timed_s;
  f.snapshot_bytes = last.size();

  const auto t = Clock::now();
  VT_ASSIGN_OR_RETURN(auto replayer, Trainer::restore(task, before_last));
  VT_RETURN_IF_ERROR(replayer->train_epoch());
  const double replay_s = seconds_since(t);
  VT_ASSIGN_OR_RETURN(vt::Bytes replayed, replayer->snapshot());
  f.identical = replayed == last;
  f.replay_ratio =
      last_epoch_s / replay_s;  // same steps, so the time ratio is the throughput ratio
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (auto stop = parse(argc, argv, args)) return *stop;
  std::vector<std::string> models{"cnn", "gpt"};
  if (args.model != "all") models = {args.model};
  vt::bench::Report report(argc, argv);
  report.add("threads", args.threads);
  for (const std::string& m : models) {
    auto task = make_task(m, args);
    auto f = task ? measure(*task) : vt::Result<Figures>(task.error());
    if (!f) {
      std::fprintf(stderr, "bench_training: %s: %s\n", m.c_str(), f.error().message.c_str());
      return 1;
    }
    report.add("params_" + m, f->params);
    report.add("steps_per_epoch_" + m, task->steps_per_epoch);
    report.add("batch_size_" + m, task->batch_size);
    report.add("train_steps_per_s_" + m, f->steps_per_s);
    report.add("epoch_ms_" + m, f->epoch_s * 1e3);
    report.add("snapshot_capture_ms_" + m, f->capture_s * 1e3);
    report.add("capture_fraction_of_epoch_" + m, f->capture_s / f->epoch_s);
    report.add("snapshot_bytes_" + m, f->snapshot_bytes);
    report.add("replay_vs_train_ratio_" + m, f->replay_ratio);
    report.add("replay_identical_" + m, f->identical);
    if (!args.recipes) continue;
    auto recipe_task = with_recipes(*task);
    auto r =
        recipe_task ? recipes_ratio(*task, *recipe_task) : vt::Result<double>(recipe_task.error());
    if (!r) {
      std::fprintf(stderr, "bench_training: %s with recipes: %s\n", m.c_str(),
                   r.error().message.c_str());
      return 1;
    }
    report.add("recipes_vs_plain_steps_ratio_" + m, *r);
  }
  return 0;
}
