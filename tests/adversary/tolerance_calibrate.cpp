// Measures the honest spread between an epoch trained with 1 intra-op thread and its replay with
// 2 and 4, over several models, seeds and epochs, and prints the thresholds docs/tolerance.md
// derives from it (spread x margin). Usage: tolerance_calibrate [seeds] [margin] [epochs]

#include <cstdio>
#include <cstdlib>

#include "tests/adversary/spread.h"
#include "training/zoo/zoo.h"

namespace {

using vt::Task;

struct Model {
  const char* label;
  Task task;
};

Task base(const char* model, vt::Options model_options, vt::Options data_options,
          std::int64_t batch) {
  auto t = vt::training::default_task(model, "synthetic");
  if (!t) {
    std::fprintf(stderr, "%s\n", t.error().message.c_str());
    std::exit(2);
  }
  Task task = *t;
  task.model.options = std::move(model_options);
  task.dataset.options = std::move(data_options);
  task.batch_size = batch;
  task.steps_per_epoch = 4;
  task.epochs = 10;
  task.determinism = vt::Determinism::kTolerance;
  task.intra_op_threads = 1;
  task.fingerprint.trail_interval = 0;
  return task;
}

}  // namespace

int main(int argc, char** argv) {
  const int seeds = argc > 1 ? std::atoi(argv[1]) : 5;
  const double margin = argc > 2 ? std::atof(argv[2]) : 10.0;
  const std::int64_t epochs = argc > 3 ? std::atoll(argv[3]) : 3;
  std::vector<Model> models = {
      {"mlp 64-256-256-10",
       base("mlp", {{"input_dim", 64}, {"hidden", 256}, {"layers", 2}, {"classes", 10}},
            {{"samples", 512}, {"input_dim", 64}, {"classes", 10}}, 64)},
      {"cnn width 8",
       base("cnn", {{"width", 8}, {"blocks", 1}, {"classes", 10}}, {{"samples", 64}}, 16)},
      {"gpt d32 l1 h2 s16",
       base("gpt", {{"vocab", 64}, {"d_model", 32}, {"layers", 1}, {"heads", 2}, {"seq_len", 16}},
            {{"samples", 64}}, 8)},
  };
  vt::adversary::Spread all;
  std::printf("epochs 1..%lld of each seed replayed\n\n", static_cast<long long>(epochs));
  std::printf(
      "| model | threads | seeds | values | rel L2 | max abs diff | max rel diff | differing |\n");
  std::printf("|---|---|---|---|---|---|---|---|\n");
  for (Model& m : models) {
    for (std::int64_t threads : {2, 4}) {
      vt::adversary::Spread worst;
      for (int seed = 1; seed <= seeds; ++seed) {
        m.task.seed = static_cast<std::uint64_t>(seed);
        auto s = vt::adversary::measure_spreads(m.task, threads, epochs);
        if (!s) {
          std::fprintf(stderr, "%s seed %d: %s\n", m.label, seed, s.error().message.c_str());
          return 1;
        }
        for (const auto& one : *s) worst.widen(one);
      }
      std::printf("| %s | 1 vs %lld | %d | %llu | %.3g | %.3g | %.3g | %.4f |\n", m.label,
                  static_cast<long long>(threads), seeds,
                  static_cast<unsigned long long>(worst.values), worst.rel_l2, worst.max_abs_diff,
                  worst.max_rel_diff, worst.differing_fraction);
      all.widen(worst);
    }
  }
  std::printf("\nworst: rel_l2 %.3g, max_abs_diff %.3g, max_rel_diff %.3g, differing %.4f\n",
              all.rel_l2, all.max_abs_diff, all.max_rel_diff, all.differing_fraction);
  std::printf("thresholds (margin %.0f): rel_l2 %.3g, atol %.3g, rtol 0, max_outlier_fraction 0\n",
              margin, all.rel_l2 * margin, all.max_abs_diff * margin);
  return 0;
}
