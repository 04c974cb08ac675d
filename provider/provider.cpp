#include "provider/provider.h"

#include <algorithm>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>

#include <nlohmann/json.hpp>

#include "common/thread_pool.h"
#include "fingerprint/fingerprint.h"
#include "fingerprint/merkle.h"
#include "protocol/keys.h"
#include "provider/crash_point.h"
#include "provider/workdir/store.h"
#include "provider/workdir/workdir.h"
#include "training/environment.h"
#include "training/eval_claim.h"
#include "training/live_fingerprint.h"
#include "training/prepared_task.h"
#include "training/zoo/sizes.h"
#include "training/zoo/zoo.h"

namespace vt::provider {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

Result<nlohmann::json> live_fingerprint_json(const training::Trainer& trainer, const Digest& seed,
                                             std::uint64_t k) {
  VT_ASSIGN_OR_RETURN(fp::Fingerprint f, live_fingerprint(trainer, seed, k));
  return fp::fingerprint_to_json(f);
}

// Snapshot buffers recycled across epochs. A fresh state-sized buffer per capture costs the
// training thread a page fault per 4 KiB and a zero fill (for a 139 MB state ~34 k faults);
// a recycled one keeps its size, so the capture only copies. At most two are in use at once: the
// capture, and the previous snapshot as its delta base (the commit before a capture ends first).
class CaptureBuffers : public std::enable_shared_from_this<CaptureBuffers> {
 public:
  std::unique_ptr<Bytes> take() {
    std::lock_guard lock(mutex_);
    if (free_.empty()) return std::make_unique<Bytes>();
    std::unique_ptr<Bytes> b = std::move(free_.back());
    free_.pop_back();
    return b;
  }

  // Shares a filled buffer; it comes back here when the last holder lets go.
  std::shared_ptr<const Bytes> share(std::unique_ptr<Bytes> filled) {
    std::weak_ptr<CaptureBuffers> home = weak_from_this();
    return std::shared_ptr<const Bytes>(filled.release(), [home](const Bytes* b) {
      std::unique_ptr<Bytes> owned(const_cast<Bytes*>(b));
      if (auto pool = home.lock()) pool->give_back(std::move(owned));
    });
  }

 private:
  void give_back(std::unique_ptr<Bytes> b) {
    std::lock_guard lock(mutex_);
    if (free_.size() < kMaxFree) free_.push_back(std::move(b));
  }

  static constexpr std::size_t kMaxFree = 3;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Bytes>> free_;
};

// One epoch's work after training: everything that needs only the captured bytes.
struct CommitJob {
  std::uint64_t epoch = 0;
  std::shared_ptr<const Bytes> canonical;
  EpochFingerprints fingerprints;
  Digest data_order_digest{};
  CommitMetrics metrics;
  std::optional<Environment> environment;  // the first commitment of this process only
  CommitTimings timings;                   // capture and wait filled in by the training thread
};

class Pipeline {
 public:
  // `threads`: the cores training leaves spare, the pipeline's own thread included.
  Pipeline(const Task& task, const Workdir& workdir, const SigningKey& key, CommitLog& log,
           SnapshotStore& store, const ProviderOptions& options, std::size_t threads)
      : task_(task), workdir_(workdir), key_(key), log_(log), store_(store), options_(options) {
    // merkle_root hashes on the calling thread too: the pool holds the other threads.
    if (threads > 1) hash_pool_ = std::make_unique<ThreadPool>(threads - 1);
  }

  // A commit still in flight (training failed after submitting it) finishes before any member
  // goes: it writes last_canonical_, which is destroyed before pending_ would be.
  ~Pipeline() {
    if (pending_.valid()) pending_.wait();
  }
  Pipeline(const Pipeline&) = delete;
  Pipeline& operator=(const Pipeline&) = delete;

  // The last committed epoch when resuming: the next snapshot is coded as a delta against it
  // (held as `canonical` when overlapping, else read back from the store).
  void resume_after(const Digest& root, std::shared_ptr<const Bytes> canonical) {
    last_root_ = root;
    has_last_ = true;
    last_canonical_ = std::move(canonical);
  }

  // Runs `job` on the background thread after the previous job finished; returns when the
  // previous job is durable. In flight at most: this job's snapshot and its delta base.
  Status submit(CommitJob job) {
    const auto t = Clock::now();
    VT_RETURN_IF_ERROR(wait());
    job.timings.wait += seconds_since(t);
    auto shared = std::make_shared<CommitJob>(std::move(job));
    pending_ = std::async(std::launch::async, [this, shared] { return commit(*shared); });
    return {};
  }

  Status wait() {
    if (!pending_.valid()) return {};
    return pending_.get();
  }

  // Commits `job` (which holds no copy) from the live state on this thread, training waiting:
  // the snapshot is read out of `source` a window at a time through the store's coder, which
  // hashes it, and is coded against the stored previous epoch read back from disk.
  Status commit_streamed(const CommitJob& job, const training::Trainer::CanonicalSource& source,
                         const training::Trainer& trainer) {
    VT_RETURN_IF_ERROR(wait());
    // Training waits meanwhile, so coding takes every core.
    if (!stream_pool_ && hardware_threads() > 1)
      stream_pool_ = std::make_unique<ThreadPool>(hardware_threads() - 1);
    const Digest id = workdir_.task_id();
    CommitTimings timings = job.timings;
    auto t = Clock::now();
    auto lap = [&t](double& into) {
      into = seconds_since(t);
      t = Clock::now();
    };
    crash_point("before_snapshot_write", job.epoch);
    std::optional<Digest> base;
    if (has_last_) base = last_root_;
    const comp::RangeReader read = [&source](std::uint64_t offset, std::span<std::uint8_t> out) {
      return source.read(offset, out);
    };
    VT_ASSIGN_OR_RETURN(
        SnapshotStore::StreamedPut put,
        store_.put_streamed(job.epoch, source.layout(), read, base, stream_pool_.get()));
    lap(timings.store);  // hashing included: the root is taken as the bytes stream past
    crash_point("after_snapshot_write", job.epoch);
    // The state has not moved since it streamed: its values at the root's positions are the
    // snapshot's (fingerprint_snapshot over the same layout draws the same positions).
    VT_ASSIGN_OR_RETURN(fp::Fingerprint f,
                        live_fingerprint(trainer, fp::commitment_seed(id, job.epoch, put.root),
                                         static_cast<std::uint64_t>(task_.fingerprint.k)));
    lap(timings.fingerprint);
    last_canonical_.reset();
    return record(job, put.root, f, put.stored, timings);
  }

 private:
  Status commit(const CommitJob& job) {
    const Digest id = workdir_.task_id();
    const Bytes& canonical = *job.canonical;
    CommitTimings timings = job.timings;
    auto t = Clock::now();
    auto lap = [&t](double& into) {
      into = seconds_since(t);
      t = Clock::now();
    };
    const Digest root = fp::merkle_root(canonical, hash_pool_.get());
    lap(timings.hash);
    VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(canonical));
    VT_ASSIGN_OR_RETURN(fp::Fingerprint f,
                        fp::fingerprint_snapshot(view, fp::commitment_seed(id, job.epoch, root),
                                                 static_cast<std::uint64_t>(task_.fingerprint.k)));
    lap(timings.fingerprint);
    crash_point("before_snapshot_write", job.epoch);
    std::optional<std::pair<Digest, ByteSpan>> base;
    if (last_canonical_) base = std::make_pair(last_root_, ByteSpan(*last_canonical_));
    VT_ASSIGN_OR_RETURN(StoredSnapshot stored, store_.put(job.epoch, root, canonical, base));
    lap(timings.store);
    crash_point("after_snapshot_write", job.epoch);
    VT_RETURN_IF_ERROR(record(job, root, f, stored, timings));
    last_canonical_ = job.canonical;
    return {};
  }

  // The signed record of a stored snapshot, appended durably; then the caller is told.
  Status record(const CommitJob& job, const Digest& root, const fp::Fingerprint& f,
                const StoredSnapshot& stored, CommitTimings timings) {
    const Digest id = workdir_.task_id();
    auto t = Clock::now();
    CommitRecord record;
    record.task_id = id;
    record.epoch = job.epoch;
    record.root = root;
    record.fingerprint = fp::fingerprint_to_json(f);
    record.tracking_fingerprint = job.fingerprints.tracking;
    record.trail = job.fingerprints.trail;
    record.data_order_digest = job.data_order_digest;
    record.metrics = job.metrics;
    record.environment = job.environment;
    VT_RETURN_IF_ERROR(log_.append(std::move(record), key_));
    timings.log = seconds_since(t);
    crash_point("after_log_append", job.epoch);
    if (options_.on_commit) {
      options_.on_commit({job.epoch, root, job.metrics.loss, job.metrics.seconds,
                          stored.stored_size, stored.raw_size, stored.already_present,
                          !job.canonical, timings, job.metrics.eval});
    }
    last_root_ = root;
    has_last_ = true;
    return {};
  }

  const Task& task_;
  const Workdir& workdir_;
  const SigningKey& key_;
  CommitLog& log_;
  SnapshotStore& store_;
  const ProviderOptions& options_;
  std::unique_ptr<ThreadPool> hash_pool_;    // null when the pipeline has one thread
  std::unique_ptr<ThreadPool> stream_pool_;  // streamed commits: every core but the caller's
  std::future<Status> pending_;
  Digest last_root_{};  // of the last committed epoch, and its bytes: the next delta's base
  bool has_last_ = false;
  std::shared_ptr<const Bytes> last_canonical_;  // overlapped commits only
};

Result<EpochFingerprints> tracking_only(const training::Trainer& trainer, const Task& task,
                                        const Digest& id) {
  EpochFingerprints f;
  auto tracking = live_fingerprint_json(trainer, fp::tracking_seed(id),
                                        static_cast<std::uint64_t>(task.fingerprint.tracking_k));
  if (!tracking) return tracking.error().context("task fingerprint.tracking_k");
  f.tracking = std::move(*tracking);
  return f;
}

// The environment this run trains in, checked against the task's pin and, when resuming an
// exact-mode run, against the environment committed last: an exact replay needs one
// environment for the whole run, so a resume elsewhere is refused rather than committed.
Result<Environment> checked_environment(const Task& task, const training::TrainerOptions& topts,
                                        const CommitLog& log) {
  Environment here = training::measure_environment(task, topts);
  if (auto outside = pin_violations(here, task); !outside.empty()) {
    return invalid_input(
        "this machine's arithmetic environment is outside the task's pin: " + outside.front() +
        " (docs/environment.md: ATEN_CPU_CAPABILITY and ONEDNN_MAX_CPU_ISA "
        "lower the levels LibTorch uses)");
  }
  for (auto it = log.records().rbegin(); it != log.records().rend(); ++it) {
    if (!it->record.environment) continue;
    auto changed = condition_differences(*it->record.environment, here, task);
    if (changed.empty()) break;
    std::string list;
    for (const EnvironmentDifference& d : changed)
      list += (list.empty() ? "" : "; ") + d.field + " " + d.committed + " (committed) vs " +
              d.here + " (here)";
    return invalid_input(
        "resuming: this machine's arithmetic environment differs from the one "
        "committed at epoch " +
        std::to_string(it->record.epoch) + ": " + list +
        "; an exact-mode run is replayed in one environment, so resume where "
        "it started (docs/environment.md)");
  }
  return here;
}

// Hardware threads minus training's intra-op threads, at least one; or as the options say.
std::size_t spare_threads(const Task& task, const ProviderOptions& options) {
  if (options.pipeline_threads > 0) return options.pipeline_threads;
  training::TrainerOptions run;
  run.intra_op_threads = options.intra_op_threads;
  const std::size_t training =
      static_cast<std::size_t>(std::max<std::int64_t>(1, training::run_threads(task, run)));
  const std::size_t cores = hardware_threads();
  return cores > training ? cores - training : 1;
}

// Whether this run streams its commitments (CommitMode). A run whose on_state hook needs each
// state's bytes (several ranks comparing theirs) overlaps.
bool streams_commits(const Task& task, const training::TrainerOptions& topts,
                     const ProviderOptions& options, const training::Trainer& trainer) {
  if (options.on_state || options.commit_mode == CommitMode::kOverlap) return false;
  if (options.commit_mode == CommitMode::kStream) return true;
  auto source = trainer.canonical_source();
  return source.ok() &&
         auto_streams((*source)->layout().total_size, training::run_device(task, topts));
}

}  // namespace

double training_waited(const CommitEvent& e) {
  const CommitTimings& t = e.timings;
  if (e.streamed) return t.capture + t.wait + t.hash + t.fingerprint + t.store + t.log;
  return t.capture + t.wait;
}

bool auto_streams(std::uint64_t snapshot_bytes, const std::string& device) {
  // A GPU's state is copied to host memory, which is not what the training is short of.
  return device.rfind("cuda", 0) != 0 && snapshot_bytes >= kStreamFromBytes;
}

std::uint64_t commitment_buffer_bytes(std::uint64_t snapshot_bytes, bool streamed) {
  constexpr std::uint64_t kPerCore = std::uint64_t{4} << 20;  // payload, base run, coder state
  // Both modes code on a pool of one thread per core; overlapped, two copies of the state and
  // the container coded from them wait beside training.
  const std::uint64_t coders = hardware_threads() * kPerCore;
  if (streamed) return 2 * kStreamWindowBytes + coders;
  return 2 * snapshot_bytes + snapshot_bytes / 2 + coders;
}

Result<ProviderSummary> run_provider(const Task& task, const ProviderOptions& options) {
  const auto start = Clock::now();
  VT_ASSIGN_OR_RETURN(Workdir workdir, Workdir::open_for(options.workdir, task));
  VT_RETURN_IF_ERROR(workdir.lock());
  const Digest id = workdir.task_id();
  VT_ASSIGN_OR_RETURN(
      SigningKey key,
      load_or_create_signing_key(options.key_dir.empty() ? workdir.keys_dir() : options.key_dir));
  VT_ASSIGN_OR_RETURN(CommitLog log,
                      CommitLog::open(workdir.log_file(), id, LogMode::kAppend, key.public_key()));
  if (!log.notice().empty() && options.on_notice) options.on_notice(log.notice());
  // The pipeline overlaps training on the cores training leaves spare: with a hash pool and a
  // coding pool of one thread per core each beside its own, it put more runnable threads than
  // cores beside training (docs/benchmarks.md, "Provider overhead").
  const std::size_t pipeline_threads = spare_threads(task, options);
  SnapshotStore store(workdir.snapshots_dir(), {options.full_every, pipeline_threads, 64});

  training::TrainerOptions topts;
  topts.task_dir = options.task_dir;
  topts.device = options.device;
  topts.intra_op_threads = options.intra_op_threads;
  topts.checkpoint_activations = options.checkpoint_activations;
  topts.collective = options.collective;
  // Commitments in another edition of the portable arithmetic are another veritrain's to make.
  VT_RETURN_IF_ERROR(training::implements_portable_arithmetic(task));
  std::unique_ptr<training::Trainer> trainer;
  Pipeline pipeline(task, workdir, key, log, store, options, pipeline_threads);
  ProviderSummary summary;
  const std::uint64_t next = log.next_epoch();
  summary.resumed_from = next;
  std::shared_ptr<const Bytes> resumed_bytes;
  Digest resumed_root{};
  if (next == 0) {
    VT_ASSIGN_OR_RETURN(trainer, training::Trainer::create(task, topts));
    // A model that cannot run on this data fails here, before epoch 0 is committed.
    VT_RETURN_IF_ERROR(trainer->check_model());
  } else {
    const SignedRecord& last = log.records().back();
    auto bytes = store.load_canonical(last.record.root);
    if (!bytes) {
      return bytes.error().context("resuming: the snapshot of committed epoch " +
                                   std::to_string(last.record.epoch));
    }
    VT_ASSIGN_OR_RETURN(trainer, training::Trainer::restore(task, *bytes, topts));
    if (trainer->epoch() != static_cast<std::int64_t>(last.record.epoch)) {
      return invalid_input("resuming: the snapshot committed for epoch " +
                           std::to_string(last.record.epoch) + " says it is epoch " +
                           std::to_string(trainer->epoch()));
    }
    resumed_bytes = std::make_shared<const Bytes>(std::move(*bytes));
    resumed_root = last.record.root;
    if (options.on_notice)
      options.on_notice("resuming after committed epoch " + std::to_string(last.record.epoch));
  }
  // What the model's layout decides: whether every commitment fits one record (sizes.h).
  VT_RETURN_IF_ERROR(
      training::check_fingerprint_sizes(task, trainer->steps_per_epoch(), trainer->layout()));
  const bool streamed = streams_commits(task, topts, options, *trainer);
  // Streamed commits read the delta base back from the store: the resumed bytes can go now.
  if (next != 0) pipeline.resume_after(resumed_root, streamed ? nullptr : std::move(resumed_bytes));
  resumed_bytes.reset();
  if (options.on_start) VT_RETURN_IF_ERROR(options.on_start(*trainer));
  VT_ASSIGN_OR_RETURN(Environment environment, checked_environment(task, topts, log));
  bool environment_committed = false;

  // `captured`: when the epoch's training ended, so that capture time includes the tracking
  // fingerprint taken before this is called.
  auto buffers = std::make_shared<CaptureBuffers>();
  auto submit = [&](std::uint64_t epoch, EpochFingerprints f, const Digest& order, CommitMetrics m,
                    Clock::time_point captured) -> Status {
    // The previous commit ends before this capture: it lets go of its delta base then (the epoch
    // before it), whose buffer this capture reuses, so two states are held at once, not three.
    // It ran while this epoch trained, so it has almost always ended already.
    const auto waiting = Clock::now();
    VT_RETURN_IF_ERROR(pipeline.wait());
    const double waited = seconds_since(waiting);
    if (streamed) {
      VT_ASSIGN_OR_RETURN(std::unique_ptr<training::Trainer::CanonicalSource> source,
                          trainer->canonical_source());
      CommitJob job{epoch, nullptr, std::move(f), order, m, {}, {}};
      if (!environment_committed) job.environment = environment;
      environment_committed = true;
      job.timings.capture = seconds_since(captured) - waited;
      job.timings.wait = waited;
      return pipeline.commit_streamed(job, *source, *trainer);
    }
    std::unique_ptr<Bytes> canonical = buffers->take();
    VT_RETURN_IF_ERROR(trainer->snapshot_into(*canonical));
    if (options.on_state && epoch > 0) VT_RETURN_IF_ERROR(options.on_state(epoch, *canonical));
    CommitJob job{epoch, buffers->share(std::move(canonical)), std::move(f), order, m, {}, {}};
    if (!environment_committed) job.environment = environment;
    environment_committed = true;
    job.timings.capture = seconds_since(captured) - waited;
    job.timings.wait = waited;
    return pipeline.submit(std::move(job));
  };

  if (next == 0 && options.commit) {
    const auto captured = Clock::now();
    VT_ASSIGN_OR_RETURN(EpochFingerprints f, tracking_only(*trainer, task, id));
    VT_RETURN_IF_ERROR(submit(0, std::move(f), Digest{}, CommitMetrics{}, captured));
  }
  for (std::int64_t e = trainer->epoch() + 1; e <= task.epochs; ++e) {
    EpochFingerprints f;
    training::EpochHooks hooks;
    // A progress report reads the loss, which waits for the GPU: ~100 per epoch is plenty.
    hooks.progress_every =
        options.on_step ? std::max<std::int64_t>(1, trainer->steps_per_epoch() / 100) : 0;
    hooks.on_progress = options.on_step;
    Status trail_status;
    if (options.commit && task.fingerprint.trail_interval > 0) {
      hooks.trail_every = task.fingerprint.trail_interval;
      hooks.on_trail = [&](std::int64_t step, const training::Trainer& t) {
        if (!trail_status) return;
        auto trail = live_fingerprint_json(
            t, fp::trail_seed(id, static_cast<std::uint64_t>(e), static_cast<std::uint64_t>(step)),
            static_cast<std::uint64_t>(task.fingerprint.tracking_k));
        if (trail) {
          f.trail.push_back(std::move(*trail));
        } else {
          trail_status = trail.error();
        }
      };
    }
    crash_point("during_training", static_cast<std::uint64_t>(e));
    VT_ASSIGN_OR_RETURN(training::EpochSummary s, trainer->train_epoch(hooks));
    VT_RETURN_IF_ERROR(std::move(trail_status));
    summary.train_seconds += s.seconds;
    if (!options.commit) continue;
    const auto captured = Clock::now();
    VT_ASSIGN_OR_RETURN(EpochFingerprints tracking, tracking_only(*trainer, task, id));
    f.tracking = std::move(tracking.tracking);
    CommitMetrics m{s.mean_loss,
                    static_cast<std::uint64_t>(s.steps),
                    s.seconds,
                    static_cast<std::uint64_t>(s.samples),
                    {}};
    if (s.eval) m.eval = training::eval_claim(*s.eval);
    VT_RETURN_IF_ERROR(
        submit(static_cast<std::uint64_t>(e), std::move(f), s.data_order_digest, m, captured));
  }
  VT_RETURN_IF_ERROR(pipeline.wait());
  if (!log.records().empty()) summary.final_root = log.records().back().record.root;
  summary.epochs_committed = log.records().size();
  summary.disk_bytes = store.disk_usage();
  summary.total_seconds = seconds_since(start);
  return summary;
}

}  // namespace vt::provider
