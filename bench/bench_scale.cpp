// bench_scale: veritrain at the size of a real model, against plain PyTorch training of the same
// gpt and batch (bench/plain_gpt.py) measured as child processes in the same run:
//   train_peak_vs_libtorch       peak RSS of `veritrain train` / the peer's          goal <= 1.3
//   replay_peak_vs_libtorch      peak RSS of `verify --jobs 1` (one replay at a time) / the peer's
//   estimate_error               `estimate`'s predicted train peak / the measured one, minus 1
//   replay_estimate_error        `estimate`'s predicted replay peak / verify's measured one, - 1
//   step_vs_libtorch_openblas    the peer's step time on OpenBLAS / veritrain's portable step
//   commit_fraction              the seconds training waited for its commitments / the epoch's
//
//   bench_scale [--json] [--d-model 768 --layers 12 --heads 12 --seq-len 256 --vocab 50257]
//               [--batch 4] [--epochs 2] [--steps 3] [--threads 2] [--openblas DIR] [--dir D]
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/bench_util.h"

namespace fs = std::filesystem;

namespace {

struct Child {
  int code = -1;
  std::uint64_t peak_rss = 0;  // the largest resident set of the child or any of its children
  double seconds = 0;
  std::string out;
};

// Runs argv with stdout to `out_file` (read back) and stderr to `err_file`; `env` entries are
// added to the environment.
Child run(const std::vector<std::string>& argv, const fs::path& out_file, const fs::path& err_file,
          const std::vector<std::string>& env = {}) {
  Child c;
  const auto start = std::chrono::steady_clock::now();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (!std::freopen(out_file.c_str(), "w", stdout) ||
        !std::freopen(err_file.c_str(), "w", stderr))
      ::_exit(127);
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> args;
    args.reserve(argv.size() + 1);
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execvp(args[0], args.data());
    ::_exit(127);
  }
  int status = 0;
  rusage usage{};
  if (pid > 0 && ::wait4(pid, &status, 0, &usage) == pid) {
    c.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    c.peak_rss = static_cast<std::uint64_t>(usage.ru_maxrss) * 1024;
  }
  c.seconds = vt::bench::seconds_since(start);
  std::ifstream in(out_file);
  std::stringstream s;
  s << in.rdbuf();
  c.out = s.str();
  return c;
}

// The last line of `text` that parses as a JSON object with `key`.
nlohmann::json last_json_with(const std::string& text, const std::string& key) {
  nlohmann::json found;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_object() && j.contains(key)) found = j;
  }
  return found;
}

struct Args {
  std::int64_t d_model = 768, layers = 12, heads = 12, seq_len = 256, vocab = 50257, batch = 4;
  std::int64_t epochs = 2, steps = 3, threads = 2;
  std::string openblas, dir = (fs::temp_directory_path() / "vt-bench-scale").string();
  std::string binary = VT_BINARY;
};

int bench(int argc, char** argv) {
  Args a;
  CLI::App app{"veritrain's memory and speed at a real model's size against plain PyTorch"};
  app.add_option("--d-model", a.d_model)->capture_default_str();
  app.add_option("--layers", a.layers)->capture_default_str();
  app.add_option("--heads", a.heads)->capture_default_str();
  app.add_option("--seq-len", a.seq_len)->capture_default_str();
  app.add_option("--vocab", a.vocab)->capture_default_str();
  app.add_option("--batch", a.batch)->capture_default_str();
  app.add_option("--epochs", a.epochs)->capture_default_str();
  app.add_option("--steps", a.steps, "Steps per epoch")->capture_default_str();
  app.add_option("--threads", a.threads)->capture_default_str();
  app.add_option(
      "--openblas", a.openblas,
      "Folder with OpenBLAS's libblas.so.3 for the peer (scripts/openblas_for_bench.sh)");
  app.add_option("--dir", a.dir, "Scratch folder")->capture_default_str();
  app.add_option("--binary", a.binary, "The veritrain to measure")->capture_default_str();
  if (auto code = vt::bench::parse_flags(app, argc, argv)) return *code;
  vt::bench::Report report(argc, argv);

  fs::remove_all(a.dir);
  fs::create_directories(a.dir);
  const fs::path dir = a.dir;
  auto s = [](std::int64_t v) { return std::to_string(v); };
  const std::string task = (dir / "task.json").string();
  Child init = run({a.binary,
                    "task",
                    "init",
                    "--model",
                    "gpt",
                    "--dataset",
                    "synthetic",
                    "--option",
                    "d_model=" + s(a.d_model),
                    "--option",
                    "layers=" + s(a.layers),
                    "--option",
                    "heads=" + s(a.heads),
                    "--option",
                    "seq_len=" + s(a.seq_len),
                    "--option",
                    "vocab=" + s(a.vocab),
                    "--batch-size",
                    s(a.batch),
                    "--epochs",
                    s(a.epochs),
                    "--steps-per-epoch",
                    s(a.steps),
                    "--optimizer",
                    "adamw",
                    "--threads",
                    s(a.threads),
                    "--data-option",
                    "samples=" + s(a.batch * a.steps),
                    "--out",
                    task},
                   dir / "init.out", dir / "init.err");
  if (init.code != 0) {
    std::cerr << "bench_scale: task init failed; see " << (dir / "init.err") << "\n";
    return 1;
  }

  // The peer, on OpenBLAS when given: what a user would otherwise run.
  std::vector<std::string> peer_env;
  if (!a.openblas.empty()) peer_env.push_back("LD_LIBRARY_PATH=" + a.openblas);
  Child peer = run(
      {"/usr/bin/python3", std::string(VT_SOURCE_DIR) + "/bench/plain_gpt.py", "--vocab",
       s(a.vocab), "--d-model", s(a.d_model), "--layers", s(a.layers), "--heads", s(a.heads),
       "--seq-len", s(a.seq_len), "--batch", s(a.batch), "--steps", "3", "--threads", s(a.threads)},
      dir / "peer.out", dir / "peer.err", peer_env);
  const nlohmann::json peer_j = last_json_with(peer.out, "peak_rss_bytes");
  if (peer.code != 0 || peer_j.is_null()) {
    std::cerr << "bench_scale: the PyTorch peer failed; see " << (dir / "peer.err") << "\n";
    return 1;
  }

  Child est = run({a.binary, "--json", "estimate", "--task", task}, dir / "estimate.out",
                  dir / "estimate.err");
  const nlohmann::json est_j = last_json_with(est.out, "train_peak_bytes");
  Child train =
      run({a.binary, "--json", "train", "--task", task, "--workdir", (dir / "wd").string()},
          dir / "train.out", dir / "train.err");
  Child verify =
      run({a.binary, "--json", "verify", "--task", task, "--workdir", (dir / "wd").string(),
           "--check-probability", "1", "--jobs", "1", "--report", (dir / "report").string()},
          dir / "verify.out", dir / "verify.err");
  if (est.code != 0 || est_j.is_null() || train.code != 0 || verify.code != 0) {
    std::cerr << "bench_scale: estimate, train or verify failed (exit " << est.code << ", "
              << train.code << ", " << verify.code << "); see " << dir << "\n";
    return 1;
  }
  double train_seconds = 0, commit_seconds = 0;
  std::istringstream lines(train.out);
  for (std::string line; std::getline(lines, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_object() || j.value("message_type", "") != "commit" || j.value("epoch", 0) == 0)
      continue;
    train_seconds += j.value("train_seconds", 0.0);
    commit_seconds += j.value("commit_wait_seconds", 0.0);
  }
  const auto peer_rss = peer_j["peak_rss_bytes"].get<double>();
  const auto predicted = est_j["train_peak_bytes"].get<double>();
  const double steps = static_cast<double>(a.steps * a.epochs);
  report.add("parameters", peer_j["parameters"]);
  report.add("peer", "PyTorch " + peer_j["torch"].get<std::string>() +
                         (a.openblas.empty() ? " (Debian's BLAS)" : " on OpenBLAS"));
  report.add("peer_peak_rss_mib", peer_rss / 1048576);
  report.add("train_peak_rss_mib", static_cast<double>(train.peak_rss) / 1048576);
  report.add("replay_peak_rss_mib", static_cast<double>(verify.peak_rss) / 1048576);
  report.add("estimate_train_peak_mib", predicted / 1048576);
  report.add("train_commit_mode", est_j["train_commit_mode"]);
  report.add("train_peak_vs_libtorch", static_cast<double>(train.peak_rss) / peer_rss);
  report.add("replay_peak_vs_libtorch", static_cast<double>(verify.peak_rss) / peer_rss);
  report.add("estimate_error", predicted / static_cast<double>(train.peak_rss) - 1.0);
  const auto replay_predicted = est_j["replay_peak_bytes"].get<double>();
  report.add("estimate_replay_peak_mib", replay_predicted / 1048576);
  report.add("replay_estimate_error",
             replay_predicted / static_cast<double>(verify.peak_rss) - 1.0);
  report.add("peer_step_seconds", peer_j["step_seconds"]);
  report.add("step_seconds", train_seconds / steps);
  report.add("step_vs_libtorch_openblas",
             peer_j["step_seconds"].get<double>() / (train_seconds / steps));
  report.add("commit_fraction", commit_seconds / train_seconds);
  report.add("train_seconds", train.seconds);
  report.add("verify_seconds", verify.seconds);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return bench(argc, argv);
  } catch (const std::exception& e) {  // a child's output that is not what it should be
    std::cerr << "bench_scale: " << e.what() << "\n";
    return 1;
  }
}
