// bench_datasets: a gpt trained on a large memory-mapped `tokens` file against the same model
// on in-memory synthetic tokens. Prints the peak RSS beside the model state (the
// snapshot) and the samples/s ratio tokens : synthetic.
//
//   bench_datasets [--gb 2] [--steps 40] [--dir /tmp] [--keep] [--json]
//
// The token file is written once (u16, a byte-level distribution drawn from the project's
// PRNG), pinned by SHA-256 like any dataset, and removed afterwards unless --keep. Each run
// measures one training epoch of --steps steps after a warm-up epoch.

#include <fstream>
#include <string>

#include <CLI/CLI.hpp>

#include "bench/bench_util.h"
#include "common/mapped_file.h"
#include "training/trainer.h"
#include "training/zoo/prng.h"
#include "training/zoo/zoo.h"

namespace {

using namespace vt;

// VmHWM (peak resident set) or VmRSS of this process, in MiB.
double proc_status_mib(const std::string& key) {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) == 0) return std::stod(line.substr(key.size() + 1)) / 1024.0;
  }
  return -1;
}

Status write_tokens(const std::filesystem::path& file, double gb) {
  std::ofstream out(file, std::ios::binary);
  training::Prng rng(1);
  std::vector<std::uint8_t> buf(std::size_t{1} << 24);
  const auto total = static_cast<std::uint64_t>(gb * (1ull << 30));
  for (std::uint64_t written = 0; written < total; written += buf.size()) {
    for (std::size_t i = 0; i < buf.size(); i += 2) {
      buf[i] = static_cast<std::uint8_t>(32 + rng.below(96));
      buf[i + 1] = 0;
    }
    out.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
  }
  out.close();
  if (!out) return io_error(file.string() + ": write failed");
  return {};
}

Task gpt_task(std::int64_t steps) {
  Task t = *training::default_task("gpt", "synthetic");
  t.model.options = {{"vocab", 256}, {"d_model", 64}, {"heads", 4}, {"layers", 2}, {"seq_len", 64}};
  t.steps_per_epoch = steps;
  t.batch_size = 32;
  t.epochs = 2;
  t.dataset.options = {{"samples", 4096}};
  return t;
}

struct Run {
  double samples_per_second = 0;
  double state_mib = 0;
  double create_seconds = 0;
};

Result<Run> train(const Task& task, const std::filesystem::path& dir) {
  training::TrainerOptions o;
  o.task_dir = dir;
  const auto t0 = std::chrono::steady_clock::now();
  VT_ASSIGN_OR_RETURN(auto trainer, training::Trainer::create(task, o));
  Run r;
  r.create_seconds = bench::seconds_since(t0);
  VT_RETURN_IF_ERROR(trainer->train_epoch());  // warm-up: allocator, page faults of the weights
  VT_ASSIGN_OR_RETURN(auto s, trainer->train_epoch());
  r.samples_per_second = static_cast<double>(s.samples) / s.seconds;
  VT_ASSIGN_OR_RETURN(Bytes snap, trainer->snapshot());
  r.state_mib = static_cast<double>(snap.size()) / (1 << 20);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  double gb = 2;
  std::int64_t steps = 40;
  std::string dir = "/tmp";
  bool keep = false, json = false;
  CLI::App app("gpt on a large memory-mapped tokens file vs synthetic tokens");
  app.add_option("--gb", gb, "Size of the token file in GiB")->capture_default_str();
  app.add_option("--steps", steps, "Steps per measured epoch")->capture_default_str();
  app.add_option("--dir", dir, "Where to write the token file")->capture_default_str();
  app.add_flag("--keep", keep, "Keep the token file");
  app.add_flag("--json", json, "One JSON object");
  CLI11_PARSE(app, argc, argv);
  vt::bench::Report report(argc, argv);

  const std::filesystem::path folder = std::filesystem::path(dir) / "bench_datasets";
  std::filesystem::create_directories(folder);
  const auto file = folder / "tokens.bin";
  if (auto w = write_tokens(file, gb); !w.ok()) {
    std::cerr << w.error().message << "\n";
    return 3;
  }
  auto digest = vt::sha256_file(file);
  if (!digest.ok()) {
    std::cerr << digest.error().message << "\n";
    return 3;
  }
  const double rss_before = proc_status_mib("VmRSS");
  vt::Task tokens = gpt_task(steps);
  tokens.dataset = {};
  tokens.dataset.name = "tokens";
  tokens.dataset.path = ".";
  tokens.dataset.files = {{"tokens.bin", vt::hex_encode(*digest)}};
  // The tokens run first, in a process that has touched nothing else yet: its peak RSS is its own.
  auto t = train(tokens, folder);
  const double peak_tokens = proc_status_mib("VmHWM");
  auto s = train(gpt_task(steps), folder);
  if (!keep) std::filesystem::remove(file);
  if (!t.ok() || !s.ok()) {
    std::cerr << (t.ok() ? s.error().message : t.error().message) << "\n";
    return 4;
  }
  report.add("token_file_gib", gb);
  report.add("rss_before_training_mib", rss_before);
  report.add("peak_rss_tokens_run_mib", peak_tokens);
  report.add("model_state_mib", t->state_mib);
  report.add("peak_rss_minus_state_mib", peak_tokens - t->state_mib);
  report.add("open_and_hash_seconds", t->create_seconds);
  report.add("samples_per_second_tokens", t->samples_per_second);
  report.add("samples_per_second_synthetic", s->samples_per_second);
  report.add("tokens_over_synthetic", t->samples_per_second / s->samples_per_second);
  return 0;
}
