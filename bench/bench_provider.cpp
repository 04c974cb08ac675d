// What commitments and storage cost a provider: the same task run twice in one process
// through run_provider, with commitments and storage on and off (`commit = false`, the
// provider's own train-only baseline), each into a fresh scratch workdir.
//
//   overhead_fraction             epoch_seconds_on / epoch_seconds_off - 1
//   epoch_seconds_on|off          steady-state wall time per epoch: from the end of epoch 1 to
//                                 the end of the last epoch, divided by the epochs between. With
//                                 commitments on it holds each epoch's snapshot capture, the
//                                 wait for the previous commitment, and training while the
//                                 pipeline hashes and compresses on the other cores
//   total_seconds_on|off          whole run_provider calls (trainer set-up, epoch 0's commitment
//                                 and the last epoch's, which nothing overlaps)
//   commit_latency_seconds        end of an epoch's last step to its durable commitment (mean)
//   pipeline_seconds_per_epoch    the pipeline's work for one epoch alone, on idle cores: Merkle
//                                 root, fingerprint, stored container (3 deltas : 1 full, as the
//                                 default full_every = 4 stores them), signed log append
//   params                        the model's parameter count
//   stage_*_seconds               medians over the committed epochs >= 1 of the run with
//                                 commitments (provider::CommitTimings): capture and wait on the
//                                 training thread, hash, fingerprint, store, log on the pipeline's
//   cpu_seconds_on|off, minor_faults_on|off, involuntary_switches_on|off, voluntary_switches_on|off
//                                 getrusage(RUSAGE_SELF) over each run: CPU time, page faults,
//                                 context switches (a thrashing or serialising pipeline shows here)
//   --repeat N                    N (off, on) pairs back to back; the epoch figures are medians
//                                 over the pairs and overhead_fraction_runs lists each pair's
//   --before                      each round also runs the pipeline as it was first set up
//   (hardware
//                                 threads + 1 hashing and coding threads) between off and on:
//                                 overhead_fraction_before[_runs], against the same off run
//   pipeline_threads              the pipeline's threads now (cores training leaves spare)
//
//   bench_provider [--json] [--d-model N] [--layers N] [--vocab N] [--seq-len N] [--batch N]
//                  [--steps N] [--epochs N] [--threads N] [--repeat N] [--before] [--dir SCRATCH]

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <mutex>

#include "bench/bench_util.h"
#include "common/thread_pool.h"
#include "fingerprint/fingerprint.h"
#include "fingerprint/merkle.h"
#include "protocol/keys.h"
#include "protocol/log.h"
#include "provider/provider.h"
#include "provider/workdir/store.h"
#include "training/zoo/zoo.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using vt::bench::seconds_since;

struct Args {
  // gpt with 12 blocks of d_model 256 and a 4096-token vocabulary: 11.5M parameters. Few
  // tokens per step: Debian's LibTorch multiplies matrices with the reference BLAS (~2 GFLOP/s
  // on one core), so a step of 2 x 16 tokens already takes about a second.
  std::int64_t d_model = 256, layers = 12, vocab = 4096, seq_len = 16, batch = 2;
  std::int64_t steps = 8, epochs = 4, threads = 1, repeat = 1;
  bool before = false;
  fs::path dir = fs::temp_directory_path();
};

std::optional<int> parse(int argc, char** argv, Args& a) {
  CLI::App app{"bench_provider: epoch time with commitments against without, per-stage times"};
  app.add_option("--d-model", a.d_model, "gpt width")->check(CLI::PositiveNumber);
  app.add_option("--layers", a.layers, "gpt blocks")->check(CLI::PositiveNumber);
  app.add_option("--vocab", a.vocab, "gpt vocabulary")->check(CLI::PositiveNumber);
  app.add_option("--seq-len", a.seq_len, "Tokens per example")->check(CLI::PositiveNumber);
  app.add_option("--batch", a.batch, "Examples per step")->check(CLI::PositiveNumber);
  app.add_option("--steps", a.steps, "Steps per epoch")->check(CLI::PositiveNumber);
  app.add_option("--epochs", a.epochs, "Epochs (one warm-up, at least two timed)")
      ->check(CLI::Range(3, 1 << 20));
  app.add_option("--threads", a.threads, "The task's intra-op threads")->check(CLI::PositiveNumber);
  app.add_option("--repeat", a.repeat, "Rounds; figures are medians")->check(CLI::PositiveNumber);
  app.add_flag("--before", a.before, "Also run the old pipeline set-up in each round");
  app.add_option("--dir", a.dir, "Scratch folder");
  return vt::bench::parse_flags(app, argc, argv);
}

vt::Result<vt::Task> make_task(const Args& a) {
  VT_ASSIGN_OR_RETURN(vt::Task task, vt::training::default_task("gpt", "synthetic"));
  task.epochs = a.epochs;
  task.steps_per_epoch = a.steps;
  task.batch_size = a.batch;
  task.intra_op_threads = a.threads;
  task.optimizer = {.name = "adamw", .lr = 3e-4, .weight_decay = 0.01};
  task.model.options = {{"vocab", a.vocab},     {"d_model", a.d_model}, {"layers", a.layers},
                        {"heads", 4},           {"seq_len", a.seq_len}, {"mlp_ratio", 4},
                        {"dropout_permille", 0}};
  task.dataset.options = {{"samples", a.steps * task.batch_size}};
  // Every floating-point tensor gets a position; 12 blocks with AdamW hold 450 of them, more
  // than the default tracking_k of 256 (run_provider would refuse the task at epoch 0).
  task.fingerprint.tracking_k = 1024;
  VT_RETURN_IF_ERROR(vt::training::validate_for_training(task));
  return task;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

struct Usage {
  double cpu = 0;
  long minor_faults = 0, voluntary = 0, involuntary = 0;
  static Usage now() {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    auto sec = [](const timeval& t) {
      return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
    };
    return {sec(u.ru_utime) + sec(u.ru_stime), u.ru_minflt, u.ru_nvcsw, u.ru_nivcsw};
  }
  Usage operator-(const Usage& o) const {
    return {cpu - o.cpu, minor_faults - o.minor_faults, voluntary - o.voluntary,
            involuntary - o.involuntary};
  }
};

struct Run {
  std::vector<double> epoch_end;  // seconds since the run started, per trained epoch
  std::vector<double> committed;  // the same for each epoch's durable commitment (epoch >= 1)
  std::vector<vt::provider::CommitTimings> timings;  // per committed epoch >= 1
  Usage usage;
  double total = 0;
  double steady_epoch() const {
    return (epoch_end.back() - epoch_end.front()) / static_cast<double>(epoch_end.size() - 1);
  }
};

// How the committing run's pipeline is set up: as the provider does now, or as it was first set up
// (as many hashing and coding threads as hardware threads beside the pipeline's own).
enum class Pipeline { kOff, kBefore, kNow };

vt::Result<Run> run(const vt::Task& task, const fs::path& workdir, Pipeline pipeline) {
  const bool commit = pipeline != Pipeline::kOff;
  fs::remove_all(workdir);
  Run r;
  std::mutex mu;  // on_commit comes from the pipeline's thread
  const auto start = Clock::now();
  vt::provider::ProviderOptions o;
  o.workdir = workdir;
  o.commit = commit;
  if (pipeline == Pipeline::kBefore) {
    o.pipeline_threads = vt::hardware_threads() + 1;
  }
  o.on_step = [&](const vt::training::StepMetrics& m) {
    if (m.step_in_epoch == m.steps_in_epoch) r.epoch_end.push_back(seconds_since(start));
  };
  o.on_commit = [&](const vt::provider::CommitEvent& e) {
    std::lock_guard<std::mutex> lock(mu);
    if (e.epoch == 0) return;
    r.committed.push_back(seconds_since(start));
    r.timings.push_back(e.timings);
  };
  const Usage before = Usage::now();
  VT_RETURN_IF_ERROR(vt::provider::run_provider(task, o));
  r.total = seconds_since(start);
  r.usage = Usage::now() - before;
  return r;
}

struct PipelineCost {
  double hash = 0, fingerprint = 0, store_delta = 0, store_full = 0, log = 0;
  double per_epoch() const { return hash + fingerprint + (3 * store_delta + store_full) / 4 + log; }
};

// Pipeline::commit's steps, one at a time on idle cores, over the last two stored snapshots.
vt::Result<PipelineCost> pipeline_alone(const vt::Task& task, const fs::path& workdir,
                                        const fs::path& scratch) {
  const vt::Digest id = vt::task_id(task);
  VT_ASSIGN_OR_RETURN(vt::CommitLog log,
                      vt::CommitLog::open(workdir / "commitments.log", id, vt::LogMode::kReadOnly));
  const auto& recs = log.records();
  vt::provider::SnapshotStore store(workdir / "snapshots", {});
  VT_ASSIGN_OR_RETURN(vt::Bytes base, store.load_canonical(recs[recs.size() - 2].record.root));
  VT_ASSIGN_OR_RETURN(vt::Bytes bytes, store.load_canonical(recs.back().record.root));
  PipelineCost c;
  vt::ThreadPool pool(0);  // as the provider's hash pool
  vt::Digest root{};
  c.hash = vt::bench::best_seconds(2, [&] { root = vt::fp::merkle_root(bytes, &pool); });
  vt::Status st;
  vt::Result<vt::fp::Fingerprint> f = vt::internal_error("not run");
  c.fingerprint = vt::bench::best_seconds(2, [&] {
    auto view = vt::parse_safetensors(bytes);
    f = view ? vt::fp::fingerprint_snapshot(*view, vt::fp::commitment_seed(id, 1, root),
                                            static_cast<std::uint64_t>(task.fingerprint.k))
             : vt::Result<vt::fp::Fingerprint>(view.error());
  });
  if (!f) return f.error();
  const vt::Digest base_root = recs[recs.size() - 2].record.root;
  auto put = [&](std::uint64_t epoch, bool delta) {
    fs::remove_all(scratch / "s");
    vt::provider::SnapshotStore fresh(scratch / "s", {});
    const auto t = Clock::now();
    auto stored = delta
                      ? fresh.put(epoch, root, bytes, std::make_pair(base_root, vt::ByteSpan(base)))
                      : fresh.put(epoch, root, bytes, std::nullopt);
    if (!stored) st = stored.error();
    return seconds_since(t);
  };
  c.store_delta = put(1, true);
  c.store_full = put(4, false);
  VT_RETURN_IF_ERROR(st);
  VT_ASSIGN_OR_RETURN(vt::SigningKey key, vt::load_or_create_signing_key(workdir / "keys"));
  VT_ASSIGN_OR_RETURN(vt::CommitLog out,
                      vt::CommitLog::open(scratch / "log", id, vt::LogMode::kAppend));
  vt::CommitRecord rec = recs.back().record;  // same size as a real record
  rec.epoch = 0, rec.prev = {}, rec.time.clear(), rec.signer.clear();
  const auto t = Clock::now();
  VT_RETURN_IF_ERROR(out.append(std::move(rec), key));
  c.log = seconds_since(t);
  return c;
}

}  // namespace

int main(int argc, char** argv) {
  Args args;
  if (auto stop = parse(argc, argv, args)) return *stop;
  auto fail = [](const std::string& what, const vt::Error& e) {
    std::fprintf(stderr, "bench_provider: %s: %s\n", what.c_str(), e.message.c_str());
    return 1;
  };
  auto task = make_task(args);
  if (!task) return fail("task", task.error());
  const fs::path scratch = args.dir / ("vt-bench-provider-" + std::to_string(::getpid()));
  // Off first in each pair: both runs then start from the same warm process (allocator, page
  // cache of nothing yet written), and the committing run cannot profit from the other's files.
  // Pairs back to back, so that a machine whose load changes affects both sides of each.
  // With --before, each round also runs the pipeline as it was first set up.
  std::vector<Run> offs, ons, befores;
  for (std::int64_t i = 0; i < args.repeat; ++i) {
    auto off_i = run(*task, scratch / "off", Pipeline::kOff);
    if (!off_i) return fail("run without commitments", off_i.error());
    offs.push_back(std::move(*off_i));
    if (args.before) {
      auto before_i = run(*task, scratch / "before", Pipeline::kBefore);
      if (!before_i) return fail("run with commitments as before", before_i.error());
      befores.push_back(std::move(*before_i));
    }
    auto on_i = run(*task, scratch / "on", Pipeline::kNow);
    if (!on_i) return fail("run with commitments", on_i.error());
    ons.push_back(std::move(*on_i));
  }
  std::vector<double> off_epoch, on_epoch, fractions, before_fractions;
  for (std::size_t i = 0; i < offs.size(); ++i) {
    off_epoch.push_back(offs[i].steady_epoch());
    on_epoch.push_back(ons[i].steady_epoch());
    fractions.push_back(on_epoch.back() / off_epoch.back() - 1.0);
    if (args.before) before_fractions.push_back(befores[i].steady_epoch() / off_epoch.back() - 1.0);
  }
  const Run* off = &offs.back();
  const Run* on = &ons.back();
  auto cost = pipeline_alone(*task, scratch / "on", scratch);
  if (!cost) return fail("pipeline alone", cost.error());
  std::int64_t params = 0;
  if (auto t = vt::training::Trainer::create(*task); t) params = (*t)->parameter_count();
  fs::remove_all(scratch);

  double latency = 0;
  for (std::size_t i = 0; i < on->committed.size(); ++i)
    latency += on->committed[i] - on->epoch_end[i];
  latency /= static_cast<double>(on->committed.size());

  vt::bench::Report report(argc, argv);
  report.add("model", "gpt d_model " + std::to_string(args.d_model) + ", " +
                          std::to_string(args.layers) + " layers, vocab " +
                          std::to_string(args.vocab) + ", " + std::to_string(args.batch) + " x " +
                          std::to_string(args.seq_len) + " tokens per step, AdamW");
  report.add("params", params);
  report.add("epochs", task->epochs);
  report.add("steps_per_epoch", task->steps_per_epoch);
  report.add("threads", task->intra_op_threads);
  report.add("hardware_threads", vt::hardware_threads());
  report.add("pipeline_threads",
             vt::hardware_threads() > static_cast<std::size_t>(args.threads)
                 ? vt::hardware_threads() - static_cast<std::size_t>(args.threads)
                 : std::size_t{1});
  report.add("repeat", args.repeat);
  report.add("epoch_seconds_off", median(off_epoch));
  report.add("epoch_seconds_on", median(on_epoch));
  report.add("overhead_fraction", median(fractions));
  report.add("overhead_fraction_runs", fractions);
  if (args.before) {
    report.add("overhead_fraction_before", median(before_fractions));
    report.add("overhead_fraction_before_runs", before_fractions);
  }
  report.add("total_seconds_off", off->total);
  report.add("total_seconds_on", on->total);
  report.add("overhead_fraction_total", on->total / off->total - 1.0);
  report.add("commit_latency_seconds", latency);
  report.add("pipeline_seconds_per_epoch", cost->per_epoch());
  report.add("pipeline_hash_seconds", cost->hash);
  report.add("pipeline_fingerprint_seconds", cost->fingerprint);
  report.add("pipeline_store_delta_seconds", cost->store_delta);
  report.add("pipeline_store_full_seconds", cost->store_full);
  report.add("pipeline_log_append_seconds", cost->log);
  auto stage = [&](double vt::provider::CommitTimings::*field) {
    std::vector<double> v;
    for (const Run& r : ons)
      for (const auto& t : r.timings) v.push_back(t.*field);
    return median(v);
  };
  report.add("stage_capture_seconds", stage(&vt::provider::CommitTimings::capture));
  report.add("stage_wait_seconds", stage(&vt::provider::CommitTimings::wait));
  report.add("stage_hash_seconds", stage(&vt::provider::CommitTimings::hash));
  report.add("stage_fingerprint_seconds", stage(&vt::provider::CommitTimings::fingerprint));
  report.add("stage_store_seconds", stage(&vt::provider::CommitTimings::store));
  report.add("stage_log_seconds", stage(&vt::provider::CommitTimings::log));
  report.add("cpu_seconds_off", off->usage.cpu);
  report.add("cpu_seconds_on", on->usage.cpu);
  report.add("minor_faults_off", off->usage.minor_faults);
  report.add("minor_faults_on", on->usage.minor_faults);
  report.add("voluntary_switches_off", off->usage.voluntary);
  report.add("voluntary_switches_on", on->usage.voluntary);
  report.add("involuntary_switches_off", off->usage.involuntary);
  report.add("involuntary_switches_on", on->usage.involuntary);
  return 0;
}
