#pragma once
// Replays of challenged epochs in child processes (`veritrain replay-worker`), several at once.
// LibTorch's thread pools, RNG and CUDA state belong to the process, so replays that run at the
// same time need processes of their own. The workers are long-lived: each loads LibTorch once
// and replays one epoch after another, each from its own bytes in a fresh Trainer, so a replay
// pays neither LibTorch's start-up nor a cold allocator. Requests and answers are JSON lines over
// the worker's stdin and stdout; the states travel through files in a private scratch folder.
// Each worker replays with the task's intra-op thread count, so its result is the same bytes as
// a replay in the verifier's own process (docs/verifier.md, "Parallel replays").

#include <cstdint>
#include <deque>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <vector>

#include "common/process.h"
#include "protocol/task.h"
#include "training/trainer.h"
#include "verifier/check/epoch_check.h"

namespace vt::verifier {

class ReplayJobs {
 public:
  // `program` is a veritrain binary; `capacity` replays run at most at once.
  // Starts `capacity` workers at once, so that they load LibTorch while the caller fetches.
  // `env`: entries the workers' environment has besides this process's (ChildProcess::spawn).
  // `scratch`: the folder the states travel through (null: one of their own). A replay's state
  // stays there after finish_oldest, as Replay::state_file.
  static Result<std::unique_ptr<ReplayJobs>> create(const std::filesystem::path& program,
                                                    std::size_t capacity, const Task& task,
                                                    const training::TrainerOptions& trainer,
                                                    std::shared_ptr<ScratchFolder> scratch = {},
                                                    const std::vector<std::string>& env = {});
  ~ReplayJobs();  // ends the workers and removes the files it made, but for replayed states
  ReplayJobs(const ReplayJobs&) = delete;
  ReplayJobs& operator=(const ReplayJobs&) = delete;

  std::size_t capacity() const { return workers_.size(); }
  std::size_t running() const { return jobs_.size(); }

  // Starts replaying `epoch` from the canonical state `start`; needs running() < capacity().
  Status start(std::uint64_t epoch, ByteSpan start);
  // Waits for the earliest started replay: replays finish in the order they were started.
  Result<Replay> finish_oldest();
  // Ends idle workers until at most `keep` remain (never one that is replaying).
  void retire_idle(std::size_t keep);

 private:
  struct Worker {
    ChildProcess child;
    std::filesystem::path log;  // its stderr
    bool busy = false;
  };
  struct Job {
    std::uint64_t epoch;
    std::size_t worker;                   // index into workers_
    std::filesystem::path before, after;  // its states, in the scratch folder
  };
  explicit ReplayJobs(std::shared_ptr<ScratchFolder> scratch);
  std::filesystem::path own_file(const std::string& stem, const std::string& suffix);
  Error worker_failed(Worker& w, const std::string& what, const std::string& why);

  std::shared_ptr<ScratchFolder> scratch_;
  std::vector<std::filesystem::path> own_files_;  // removed with the workers
  std::vector<Worker> workers_;
  std::deque<Job> jobs_;  // started, oldest first; at most one per worker
};

// How many replays to run at once when the user did not say: one on a GPU (they would share
// its memory and compute), else as many as the cores hold at the task's thread count, and no
// more than there are epochs to replay.
std::size_t automatic_replay_jobs(const Task& task, const training::TrainerOptions& trainer,
                                  std::size_t epochs);
// And no more than the memory the kernel calls available (MemAvailable; the most a uint64 holds
// when /proc/meminfo cannot be read) fits at one replay's peak: guessed before any replay ran
// (512 MiB for LibTorch and the data, plus four times the state: weights and optimizer state,
// the start being loaded, gradients, activations), then the peak resident set the workers
// measure (Replay::peak_rss_bytes). At least one; unlimited when the memory is unknown.
std::uint64_t available_memory();
std::uint64_t replay_peak_guess(std::uint64_t snapshot_bytes);
std::size_t replays_that_fit(std::uint64_t available, std::uint64_t per_replay);
// This process's peak resident set so far (getrusage), 0 when unknown.
std::uint64_t peak_resident_bytes();

// The worker's side: reads the task once, then one request per line from `in` until its end:
// {"epoch": E, "from": PATH, "out": PATH}. Each is replayed from the state in `from` (canonical
// safetensors) in a fresh Trainer, the state after it written to `out`, and one line answered on
// `out_lines`: {"ok": true, "root", "data_order_digest", "notes", "seconds",
// "loss_bits", "steps", "samples", "trail"}, or {"ok": false,
// "code": the exit code the failure maps to (docs/cli.md), "error": the message}. A failed
// request does not end the worker; a request line it cannot read does (an error).
struct ReplayWorkerArgs {
  std::filesystem::path task;
  training::TrainerOptions trainer;
};
Status run_replay_worker(const ReplayWorkerArgs& args, std::istream& in, std::ostream& out_lines);

}  // namespace vt::verifier
