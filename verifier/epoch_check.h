#pragma once
// One challenged epoch: fetch the committed states before and after it, check them against the
// commitments, replay the epoch from the state before, and compare (docs/verifier.md).

#include <optional>
#include <string>
#include <vector>

#include "fingerprint/compare.h"
#include "protocol/task.h"
#include "training/trainer.h"
#include "verifier/source.h"

namespace vt::verifier {

struct CheckContext {
  const Task* task = nullptr;
  Digest task_id{};
  training::TrainerOptions trainer;
  bool fingerprint_only = false;  // don't fetch the "after" snapshot; judge by fingerprint
};

struct EpochCheck {
  std::uint64_t epoch = 0;
  bool passed = false;
  std::vector<std::string> failures;  // each names the epoch and what failed
  std::optional<fp::Comparison> fingerprint;   // replay vs committed fingerprint
  std::optional<fp::Comparison> full_state;    // replay vs the fetched "after" snapshot
  bool replay_root_matches = false;            // exact mode: the strongest statement
  Digest replay_root{};
  double replay_seconds = 0.0;
  std::uint64_t bytes_fetched = 0;
  std::vector<std::string> replay_notes;       // tolerance mode: what differed in the setup
};

// Errors are reserved for failures to check at all (I/O, a broken local setup); anything the
// provider got wrong is a failed EpochCheck.
Result<EpochCheck> check_epoch(EvidenceSource& source, const CheckContext& ctx, const SignedRecord& before,
                               const SignedRecord& after);

// check_epoch in three parts, so that the replays of several epochs can run at once elsewhere
// (verifier/replay_jobs.h) while the next snapshots are fetched.

// The part that reads the provider: the snapshots, checked against their commitments.
struct PreparedEpoch {
  EpochCheck check;                          // its failures so far
  SignedRecord after;
  Bytes start;                               // the committed state before the epoch
  std::optional<Bytes> end;                  // the committed state after it, when fetched
  // Set once the start state and the committed fingerprint are usable: the epoch is replayed
  // then even if the "after" state failed its checks, so the verdict says both.
  std::optional<fp::Fingerprint> committed;
  bool replayable() const { return committed.has_value(); }
};
Result<PreparedEpoch> prepare_epoch(EvidenceSource& source, const CheckContext& ctx, const SignedRecord& before,
                                    const SignedRecord& after);

// What re-running the epoch produced.
struct Replay {
  Bytes snapshot;  // canonical bytes of the state after the replayed epoch
  Digest data_order_digest{};
  std::vector<std::string> notes;  // Trainer::replay_notes()
  double seconds = 0.0;            // restore + epoch + snapshot
};
Result<Replay> replay_here(const CheckContext& ctx, ByteSpan start);

// Compares a replay with the commitments and the fetched "after" state.
Result<EpochCheck> judge_epoch(PreparedEpoch prepared, const Replay& replay, const CheckContext& ctx);

// The comparison mode and thresholds a task asks for.
fp::CompareMode compare_mode(const Task& task);
fp::Tolerance tolerance_of(const Task& task);

}  // namespace vt::verifier
