// bench_distributed: the gradient-group tree across ranks (docs/training.md, "Gradient
// groups") against c10d's own Gloo allreduce, and a W = 2 training step against W = 1.
//
//   bench_distributed [--json] [--floats N] [--repeats R] [--steps S] [--hidden H]
//
// The two ranks are child processes of this one, forked before LibTorch starts any thread;
// rank 0 writes its figures to a file the parent reads. Both all-reduces move the same N floats
// in the same run, best of R; the step times are one epoch of S steps divided by S.
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/bench_util.h"
#include "common/process.h"
#include "training/distributed.h"
#include "training/trainer.h"

namespace vt::bench {
namespace {

struct Args {
  std::int64_t floats = 10'000'000;
  int repeats = 10;
  std::int64_t steps = 10;
  std::int64_t hidden = 512;
};

Task step_task(const Args& a) {
  Task t;
  t.model.name = "mlp";
  t.model.options = {{"hidden", a.hidden}, {"layers", 2}, {"input_dim", 256}};
  t.dataset.name = "synthetic";
  t.dataset.options = {{"samples", 512 * a.steps}, {"input_dim", 256}};
  t.epochs = 1;
  t.steps_per_epoch = a.steps;
  t.batch_size = 512;
  t.gradient_groups = 4;
  return t;
}

// One epoch's seconds per step; `collective` null for W = 1.
double step_seconds(const Args& a, std::shared_ptr<training::Collective> collective) {
  training::TrainerOptions o;
  o.collective = std::move(collective);
  auto trainer = training::Trainer::create(step_task(a), o);
  if (!trainer) throw std::runtime_error(trainer.error().message);
  auto s = (*trainer)->train_epoch();
  if (!s) throw std::runtime_error(s.error().message);
  return s->seconds / static_cast<double>(s->steps);
}

int run_rank(const Args& a, int rank, int port, const std::string& out) {
  training::DistributedOptions d;
  d.rank = rank;
  d.world_size = 2;
  d.master_port = port;
  auto c = training::Collective::connect(d);
  if (!c) {
    std::cerr << "rank " << rank << ": " << c.error().message << "\n";
    return 3;
  }
  std::vector<float> values(static_cast<std::size_t>(a.floats));
  auto fill = [&] {
    for (std::size_t i = 0; i < values.size(); ++i)
      values[i] = static_cast<float>((i * 2654435761u) % 1000) * 1e-3f;
  };
  bool ok = true;
  fill();
  const double tree =
      best_seconds(a.repeats, [&] { ok = ok && (*c)->tree_allreduce(values).ok(); });
  fill();
  const double gloo =
      best_seconds(a.repeats, [&] { ok = ok && (*c)->gloo_allreduce(values).ok(); });
  const double step = step_seconds(a, *c);
  ok = ok && (*c)->finish().ok();
  if (!ok) return 3;
  if (rank == 0) {
    nlohmann::json j = {{"tree", tree}, {"gloo", gloo}, {"step", step}};
    std::ofstream(out) << j.dump();
  }
  return 0;
}

}  // namespace
}  // namespace vt::bench

namespace vt::bench {
namespace {

int run(int argc, char** argv) {
  Args a;
  CLI::App app{"bench_distributed: tree all-reduce vs Gloo allreduce, W = 2 step vs W = 1"};
  bool json = false;
  app.add_flag("--json", json, "Print the figures as one JSON object");
  app.add_option("--floats", a.floats, "Floats per all-reduce")
      ->check(CLI::Range(std::int64_t{2}, std::int64_t{1} << 30));
  app.add_option("--repeats", a.repeats, "All-reduces per method (best is reported)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--steps", a.steps, "Training steps timed per W")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{100000}));
  app.add_option("--hidden", a.hidden, "mlp hidden width of the timed task")
      ->check(CLI::Range(std::int64_t{1}, std::int64_t{1} << 16));
  CLI11_PARSE(app, argc, argv);
  auto port = free_loopback_port();
  if (!port) {
    std::cerr << port.error().message << "\n";
    return 3;
  }
  const std::string out =
      (std::filesystem::temp_directory_path() / ("bench_distributed." + std::to_string(::getpid())))
          .string();
  std::vector<pid_t> ranks;
  for (int r = 0; r < 2; ++r) {
    const pid_t pid = ::fork();
    if (pid == 0) ::_exit(run_rank(a, r, *port, out));
    ranks.push_back(pid);
  }
  bool ok = true;
  for (pid_t pid : ranks) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    ok = ok && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  }
  if (!ok) {
    std::cerr << "bench_distributed: a rank failed\n";
    return 3;
  }
  nlohmann::json w2 = nlohmann::json::parse(std::ifstream(out));
  std::filesystem::remove(out);
  const double w1_step = step_seconds(a, nullptr);
  Report report(argc, argv);
  report.add("floats", a.floats);
  report.add("tree_allreduce_seconds", w2["tree"]);
  report.add("gloo_allreduce_seconds", w2["gloo"]);
  report.add("tree_over_gloo", w2["tree"].get<double>() / w2["gloo"].get<double>());
  report.add("step_task", "mlp hidden " + std::to_string(a.hidden) + ", batch 512 in 4 groups");
  report.add("w1_step_seconds", w1_step);
  report.add("w2_step_seconds", w2["step"]);
  report.add("w2_speedup", w1_step / w2["step"].get<double>());
  report.add("cores", static_cast<std::int64_t>(::sysconf(_SC_NPROCESSORS_ONLN)));
  return 0;
}

}  // namespace
}  // namespace vt::bench

int main(int argc, char** argv) {
  try {
    return vt::bench::run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "bench_distributed: " << e.what() << "\n";
    return 4;
  }
}
