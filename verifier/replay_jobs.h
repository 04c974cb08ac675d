#pragma once
// Replays of challenged epochs in child processes (`veritrain replay-epoch`), several at once.
// LibTorch's thread pools, RNG and CUDA state belong to the process, so replays that run at the
// same time need processes of their own; the states travel through files in a private scratch
// folder. Each child replays with the task's intra-op thread count, so its result is the same
// bytes as a replay in the verifier's own process (docs/verifier.md, "Parallel replays").

#include <cstdint>
#include <deque>
#include <filesystem>
#include <memory>

#include "common/process.h"
#include "protocol/task.h"
#include "training/trainer.h"
#include "verifier/epoch_check.h"

namespace vt::verifier {

class ReplayJobs {
 public:
  // `program` is a veritrain binary; `capacity` replays run at most at once.
  static Result<std::unique_ptr<ReplayJobs>> create(const std::filesystem::path& program, std::size_t capacity,
                                                    const Task& task, const training::TrainerOptions& trainer);
  ~ReplayJobs();  // ends any child still running and removes the scratch folder
  ReplayJobs(const ReplayJobs&) = delete;
  ReplayJobs& operator=(const ReplayJobs&) = delete;

  std::size_t capacity() const { return capacity_; }
  std::size_t running() const { return jobs_.size(); }

  // Starts replaying `epoch` from the canonical state `start`; needs running() < capacity().
  Status start(std::uint64_t epoch, ByteSpan start);
  // Waits for the earliest started replay: replays finish in the order they were started.
  Result<Replay> finish_oldest();

 private:
  struct Job {
    std::uint64_t epoch;
    ChildProcess child;
  };
  ReplayJobs(std::filesystem::path program, std::size_t capacity, std::filesystem::path scratch,
             training::TrainerOptions trainer);
  std::filesystem::path file(std::uint64_t epoch, const char* what) const;

  std::filesystem::path program_;
  std::size_t capacity_;
  std::filesystem::path scratch_;
  training::TrainerOptions trainer_;
  std::deque<Job> jobs_;
};

// How many replays to run at once when the user did not say: one on a GPU (they would share
// its memory and compute), else as many as the cores hold at the task's thread count, and no
// more than there are epochs to replay.
std::size_t automatic_replay_jobs(const Task& task, const training::TrainerOptions& trainer, std::size_t epochs);
// And no more than the memory the kernel calls available holds, at a rough 512 MiB (LibTorch,
// data) plus four times the state (weights and optimizer state, the snapshot, gradients and
// activations) per replay; at least one. Unlimited when /proc/meminfo cannot be read.
std::size_t replay_jobs_that_fit_in_memory(std::uint64_t snapshot_bytes);

// The child's side: reads the task and the state before the epoch, replays it, and writes the
// state after it (canonical safetensors) and a JSON summary as plain writes: the folder is
// scratch, and the parent reads them only once the child has exited with status 0.
struct ReplayChildArgs {
  std::filesystem::path task, from, out, summary;
  training::TrainerOptions trainer;
};
Status run_replay_child(const ReplayChildArgs& args);

}  // namespace vt::verifier
