#pragma once
// `veritrain train`: runs a task as a provider. Every epoch: capture the snapshot, take its
// Merkle root and fingerprint, store it compressed, and append a signed, chained commitment.
// Small states are committed on a background pipeline that overlaps the next epoch's training
// (the commitment for epoch e is durable before epoch e+2 starts, two snapshot copies in memory);
// large ones are streamed from the live tensors through hashing and coding while training waits,
// so no copy of the state is held (CommitMode, docs/training.md "Commitments and memory").

#include <filesystem>
#include <functional>
#include <optional>

#include "protocol/log.h"
#include "protocol/task.h"
#include "training/trainer.h"

namespace vt::provider {

// Where one epoch's commitment spent its time (seconds): the first two on the training thread,
// which waits for nothing else, the rest on the pipeline's thread while the next epoch trains.
struct CommitTimings {
  double capture = 0.0;      // snapshot bytes and tracking fingerprint out of the trainer
  double wait = 0.0;         // training blocked until the previous epoch's commitment was durable
  double hash = 0.0;         // Merkle root
  double fingerprint = 0.0;  // parse and sample at positions from the root
  double store = 0.0;        // encode, write, fsync the container
  double log = 0.0;          // sign, append, fsync the record
};

struct CommitEvent {
  std::uint64_t epoch = 0;
  Digest root{};
  double loss = 0.0;
  double train_seconds = 0.0;
  std::uint64_t stored_bytes = 0;
  std::uint64_t raw_bytes = 0;
  bool resumed_file = false;  // the container was already on disk (a resumed epoch)
  bool streamed = false;      // CommitMode::kStream: training waited for all of `timings`
  CommitTimings timings;
  std::optional<EvalClaim> eval;  // the held-out metrics committed (tasks with an eval split)
};

enum class CommitMode {
  kAuto,     // streamed for a CPU state of kStreamFromBytes or more, else overlapped
  kOverlap,  // a copy of the state committed in the background while the next epoch trains
  kStream,   // streamed from the live state while training waits: no copy held
};
// Where kAuto streams: from here two state copies cost more memory than LibTorch's own footprint,
// while the commit (about 1.5 s per GB on one core) stays a small part of an epoch that size.
inline constexpr std::uint64_t kStreamFromBytes = std::uint64_t{256} << 20;
// The window a streamed commitment reads the state in (compression/streaming.h).
inline constexpr std::uint64_t kStreamWindowBytes = std::uint64_t{64} << 20;

// Whether kAuto streams a state of `snapshot_bytes` trained on `device`.
bool auto_streams(std::uint64_t snapshot_bytes, const std::string& device);
// What the commitments of `train` hold beside the training at their peak (for `estimate`):
// streamed, a window, its coded payloads and a section's buffers per core; overlapped, two state
// copies, the payloads of one being coded and the same buffers per core.
std::uint64_t commitment_buffer_bytes(std::uint64_t snapshot_bytes, bool streamed);

// The seconds training waited for a commitment: all of it when streamed, else the capture and
// the wait for the previous one.
double training_waited(const CommitEvent& e);

struct ProviderOptions {
  std::filesystem::path workdir;
  std::filesystem::path key_dir;         // empty: <workdir>/keys, generated on first use
  std::filesystem::path task_dir = ".";  // where the task's relative paths resolve
  std::string device;                    // "" = the task's
  std::int64_t intra_op_threads = 0;     // 0 = the task's
  bool checkpoint_activations = false;   // training::TrainerOptions's
  int full_every = 4;                    // a whole snapshot every N epochs, deltas between
  CommitMode commit_mode = CommitMode::kAuto;
  bool commit = true;  // false: train only (the overhead benchmark's baseline)
  std::size_t pipeline_threads =
      0;  // commit pipeline's threads; 0 = the cores training leaves spare
  std::function<void(const training::StepMetrics&)> on_step;  // progress, every step
  std::function<void(const CommitEvent&)> on_commit;          // after each durable commitment
  std::function<void(const std::string&)> on_notice;          // recoveries worth telling
  // Several ranks (provider/ranks.h): this rank's collective goes to the trainer; on_start sees
  // the state before the first epoch trained here, on_state each trained epoch's canonical
  // state before it is committed (so that run overlaps its commits). An error from either stops
  // the run.
  std::shared_ptr<training::Collective> collective;
  std::function<Status(const training::Trainer&)> on_start;
  std::function<Status(std::uint64_t epoch, ByteSpan state)> on_state;
};

struct ProviderSummary {
  std::uint64_t epochs_committed = 0;  // including epoch 0
  std::uint64_t resumed_from = 0;      // first epoch this run trained
  Digest final_root{};
  std::uint64_t disk_bytes = 0;
  double train_seconds = 0.0;
  double total_seconds = 0.0;
};

Result<ProviderSummary> run_provider(const Task& task, const ProviderOptions& options);

// The fingerprint-module views the provider commits (also what the verifier recomputes).
struct EpochFingerprints {
  nlohmann::json tracking;            // positions from the task alone
  std::vector<nlohmann::json> trail;  // one per trail_interval steps
};

}  // namespace vt::provider
