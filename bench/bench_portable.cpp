// bench_portable: what portable arithmetic costs (docs/benchmarks.md, "Portable arithmetic").
// gemm_vs_torch_mm: kernels::gemm against torch::mm (Debian's LibTorch calls its BLAS) at
// 512×512×512 and the gpt zoo model's linear shapes, the smallest ratio of the lot;
// step_vs_exact_<model>: the exact-mode step time over the portable one for the same task.
// One thread throughout; each figure is the best of several runs, the two sides alternating.
#include <torch/torch.h>

#include <algorithm>
#include <vector>

#include "bench/bench_util.h"
#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "training/trainer.h"
#include "training/zoo.h"

namespace {

using vt::bench::best_seconds;
using vt::bench::Report;

struct Shape {
  const char* name;
  std::int64_t m, n, k;
};

double gflops(const Shape& s, double seconds) {
  return 2.0 * static_cast<double>(s.m * s.n * s.k) / seconds / 1e9;
}

double gemm_vs_torch(Report& report) {
  // The gpt's linear layers at its default batch (32 × 32 tokens, d_model 64, mlp_ratio 4).
  const std::vector<Shape> shapes = {{"512x512x512", 512, 512, 512},
                                     {"gpt_qkv", 1024, 192, 64},
                                     {"gpt_fc", 1024, 256, 64},
                                     {"gpt_out", 1024, 64, 256},
                                     {"gpt_qkv_backward_weight", 192, 64, 1024}};
  double smallest = 1e300;
  for (const Shape& s : shapes) {
    const at::Tensor a = torch::rand({s.m, s.k}), b = torch::rand({s.k, s.n});
    at::Tensor c = torch::empty({s.m, s.n});
    double ours = 1e300, theirs = 1e300;
    for (int round = 0; round < 5; ++round) {
      ours = std::min(ours, best_seconds(1, [&] {
                        vt::kernels::gemm(s.m, s.n, s.k, {a.data_ptr<float>(), s.k, 1},
                                          {b.data_ptr<float>(), s.n, 1}, c.data_ptr<float>(), s.n);
                      }));
      theirs = std::min(theirs, best_seconds(1, [&] { at::mm_out(c, a, b); }));
    }
    report.add(std::string("gemm_gflops_") + s.name, gflops(s, ours));
    report.add(std::string("torch_mm_gflops_") + s.name, gflops(s, theirs));
    smallest = std::min(smallest, theirs / ours);
  }
  return smallest;
}

// Seconds per step of `task`, best of the rounds, exact and portable alternating.
std::pair<double, double> step_seconds(vt::Task task, int rounds) {
  task.epochs = 1 + rounds;
  task.intra_op_threads = 1;
  vt::Task portable = task;
  portable.determinism = "portable";
  auto exact = vt::training::Trainer::create(task);
  auto ours = vt::training::Trainer::create(portable);
  if (!exact.ok() || !ours.ok()) {
    std::cerr << "bench_portable: " << (exact.ok() ? ours.error() : exact.error()).message << "\n";
    std::exit(1);
  }
  const double steps = static_cast<double>((*exact)->steps_per_epoch());
  (void)(*exact)->train_epoch();  // warm-up: allocator, caches
  (void)(*ours)->train_epoch();
  double best_exact = 1e300, best_ours = 1e300;
  for (int r = 1; r < rounds; ++r) {
    best_exact = std::min(best_exact, best_seconds(1, [&] { (void)(*exact)->train_epoch(); }));
    best_ours = std::min(best_ours, best_seconds(1, [&] { (void)(*ours)->train_epoch(); }));
  }
  return {best_exact / steps, best_ours / steps};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app("bench_portable: portable arithmetic against LibTorch's, one thread");
  int rounds = 4;
  std::int64_t steps = 10;
  app.add_option("--rounds", rounds, "Epochs timed per side (best of)")->capture_default_str();
  app.add_option("--steps", steps, "Steps per timed epoch")->capture_default_str();
  std::vector<std::string> models = {"gpt", "mlp", "cnn"};
  app.add_option("--models", models, "Zoo models whose steps are timed")
      ->delimiter(',')
      ->capture_default_str();
  if (auto code = vt::bench::parse_flags(app, argc, argv)) return *code;
  Report report(argc, argv);
  at::set_num_threads(1);
  vt::kernels::set_threads(1);
  report.add("threads", 1);
  report.add("gemm_vs_torch_mm", gemm_vs_torch(report));
  for (const std::string& model : models) {
    auto task = vt::training::default_task(model, "synthetic");
    if (!task.ok()) {
      std::cerr << "bench_portable: " << task.error().message << "\n";
      return 1;
    }
    task->steps_per_epoch = steps;
    const auto [exact, ours] = step_seconds(*task, rounds);
    report.add("step_ms_exact_" + model, exact * 1e3);
    report.add("step_ms_portable_" + model, ours * 1e3);
    report.add("step_vs_exact_" + model, exact / ours);
  }
  return 0;
}
