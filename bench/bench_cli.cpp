// bench_cli: how long `veritrain` takes to start and finish the commands that do not train or
// replay, as the median of --runs runs each, against the same binary's `--version` (which
// loads LibTorch to report CUDA). Target: at most 50 ms each.
//
//   bench_cli [--json] [--runs N] [--binary PATH]
//
// --binary lets the same measurement run against another build, e.g. veritrain-torch, which
// loads LibTorch for every command as `veritrain` did before it was split.
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <vector>

#include <CLI/CLI.hpp>

#include "bench/bench_util.h"

namespace {
namespace fs = std::filesystem;

// Runs argv with stdout and stderr sent to /dev/null; the exit status.
int run_quiet(const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.reserve(args.size() + 1);
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) return -1;
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

double median_ms(int runs, const std::vector<std::string>& args, int& exit_code) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    const auto t = std::chrono::steady_clock::now();
    exit_code = run_quiet(args);
    ms.push_back(vt::bench::seconds_since(t) * 1000.0);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) try {
  CLI::App app{"bench_cli: start-up time of veritrain's light commands"};
  bool json = false;
  int runs = 11;
  std::string binary = VT_BINARY;
  app.add_flag("--json", json, "One JSON object on stdout");
  app.add_option("--runs", runs, "Runs per command (the median is reported)")
      ->check(CLI::Range(1, 1000));
  app.add_option("--binary", binary, "The veritrain to measure")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  vt::bench::Report report(argc, argv);

  // Fixtures, made once (these commands may load LibTorch; they are not measured).
  const fs::path dir = fs::temp_directory_path() / ("vt-bench-cli-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string task = (dir / "task.json").string(), work = (dir / "run").string();
  if (run_quiet({binary, "task", "init", "--model", "mlp", "--epochs", "2", "--steps-per-epoch",
                 "2", "--out", task}) != 0 ||
      run_quiet({binary, "train", "--task", task, "--workdir", work}) != 0) {
    std::cerr << "bench_cli: could not make the fixtures with " << binary << "\n";
    return 1;
  }

  struct Case {
    std::string name;
    std::vector<std::string> args;
  };
  const std::vector<Case> cases = {
      {"help", {"--help"}},
      {"task_show", {"task", "show", task}},
      {"task_init", {"task", "init", "--model", "gpt", "--out", (dir / "gpt.json").string()}},
      {"plan_cost",
       {"plan", "--task", task, "--cost", "100", "--reward", "100", "--penalty", "50"}},
      {"log_verify", {"log", "verify", "--workdir", work}},
      {"inspect", {"inspect", work}},
  };
  report.add("binary", binary);
  report.add("runs", runs);
  int code = 0;
  const double version_ms = median_ms(runs, {binary, "--version"}, code);
  report.add("version_ms", version_ms);
  double worst = 0;
  for (const Case& c : cases) {
    std::vector<std::string> args = {binary};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const double ms = median_ms(runs, args, code);
    if (code != 0) std::cerr << "bench_cli: " << c.name << " exited " << code << "\n";
    report.add(c.name + "_ms", ms);
    report.add(c.name + "_vs_version", ms / version_ms);
    worst = std::max(worst, ms);
  }
  report.add("worst_light_ms", worst);
  report.add("target_ms", 50);
  report.add("meets_target", worst <= 50.0);
  std::error_code ec;
  fs::remove_all(dir, ec);
  return 0;
} catch (const std::exception& e) {  // a scratch folder that cannot be made
  std::fprintf(stderr, "bench_cli: %s\n", e.what());
  return 1;
}
