#pragma once
// One challenged epoch: fetch the committed state before it, check it against its commitment,
// replay the epoch from it, and compare (docs/verifier.md). The committed state after the epoch
// crosses the network only when something needs it (see AfterState).

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fingerprint/compare.h"
#include "protocol/task.h"
#include "training/trainer.h"
#include "verifier/check/scratch.h"
#include "verifier/check/state_check.h"
#include "verifier/source/source.h"

namespace vt::verifier {

// Whether committed held-out metrics agree with the replay's: the very bits in exact mode, the
// bounds of docs/datasets.md ("Held-out evaluation") in tolerance mode. The log keeps a
// non-finite loss as null (read back as NaN), so a non-finite loss agrees with any non-finite one
// and with nothing finite, in both modes (as the state comparison treats non-finite values).
bool eval_agrees(const EvalClaim& claimed, const EvalClaim& replayed, bool exact);

// Fetch failures that are the provider's fault (bytes that do not match the root, a broken
// container, evidence withheld: verifier/source/source.h) reject; Errc::kIo is the verifier's own
// side.
bool is_provider_fault(const Error& e);

struct EpochCheck {
  std::uint64_t epoch = 0;
  bool passed = false;
  std::vector<std::string> failures;          // each names the epoch and what failed
  std::optional<fp::Comparison> fingerprint;  // replay vs committed fingerprint
  std::optional<fp::Comparison> full_state;   // replay vs the fetched "after" snapshot
  // The epoch was re-run here. False when its evidence was unusable before a replay could start
  // (the state it starts from, its committed fingerprint) or the replay itself failed.
  bool replayed = false;
  bool replay_root_matches = false;  // exact mode: the strongest statement
  Digest replay_root{};
  double replay_seconds = 0.0;
  std::uint64_t bytes_fetched = 0;
  bool after_fetched = false;             // the committed "after" state crossed the network
  std::vector<std::string> replay_notes;  // tolerance mode: what differed in the setup
  // The epoch's claimed mean loss, and whether the replay reproduced its bits (exact mode only):
  // a report shows a metric as verified only then, else as claimed.
  double claimed_loss = 0.0;
  std::optional<double> replay_loss;
  bool loss_verified = false;
  bool trail_verified = false;  // exact mode: every committed trail fingerprint equals the replay's
  // The held-out metrics the record claims and the replay's (tasks with an eval split).
  // "verified": the replay's very bits (exact mode); "within_tolerance": inside the bounds of
  // docs/datasets.md (tolerance mode); "claimed": not reproduced.
  std::optional<EvalClaim> claimed_eval;
  std::optional<EvalClaim> replay_eval;
  std::string eval_status = "claimed";
  // A replay compared bit for bit that missed the commitment is run a second time, in a fresh
  // process with scrambled memory, before the epoch is judged (docs/verifier.md, "A second replay
  // before a rejection"): its root and time. Only replays that agree with each other may accuse.
  std::optional<Digest> second_replay_root;
  double second_replay_seconds = 0.0;
  // Set when the two replays differ from each other: the task's arithmetic does not reproduce on
  // this machine, which names where they differ. The epoch is then neither passed nor failed on
  // what the replay found (`failures` keeps only what the evidence itself got wrong).
  std::string irreproducible;
  bool inconclusive() const { return !passed && failures.empty() && !irreproducible.empty(); }
};

// Errors are reserved for failures to check at all (I/O, a broken local setup); anything the
// provider got wrong is a failed EpochCheck.
// `after_needed_later`: the committed state after this epoch is the next challenged epoch's
// start, or the final model, so fetching it now (as a delta) costs less than fetching it later.
Result<EpochCheck> check_epoch(EvidenceSource& source, const CheckContext& ctx,
                               const SignedRecord& before, const SignedRecord& after,
                               bool after_needed_later);

// check_epoch in three parts, so that the replays of several epochs can run at once elsewhere
// (verifier/check/replay_jobs.h) while the next snapshots are fetched.

// The part that reads the provider: the snapshots, checked against their commitments.
struct PreparedEpoch {
  EpochCheck check;  // its failures so far
  SignedRecord before;
  SignedRecord after;
  Bytes start;               // the committed state before the epoch
  std::optional<Bytes> end;  // the committed state after it, when fetched
  // Set once the start state and the committed fingerprint are usable: the epoch is replayed
  // then even if the "after" state failed its checks, so the verdict says both.
  std::optional<fp::Fingerprint> committed;
  bool replayable() const { return committed.has_value(); }
  // The "after" state is wanted but left for after the replay (check_epoch fetches it then).
  bool after_deferred = false;
};
// `replayed_next`: the caller replays the epoch in this process right away (check_epoch), so a
// large "after" state may wait until the replay let go of the start.
Result<PreparedEpoch> prepare_epoch(EvidenceSource& source, const CheckContext& ctx,
                                    const SignedRecord& before, const SignedRecord& after,
                                    bool after_needed_later, bool replayed_next = false);

// What re-running the epoch produced.
struct Replay {
  // The state after the replayed epoch: its canonical bytes in memory, or (snapshot empty) in a
  // scratch file, when the verifier has a scratch folder or the replay ran in a worker.
  Bytes snapshot;
  std::shared_ptr<const StateFile> state_file;
  Digest root{};  // its Merkle root
  Digest data_order_digest{};
  std::vector<std::string> notes;  // Trainer::replay_notes()
  double seconds = 0.0;            // restore + epoch + snapshot
  double loss = 0.0;               // the epoch's mean training loss
  std::uint64_t steps = 0, samples = 0;
  std::vector<nlohmann::json> trail;  // at the task's trail seeds every trail_interval steps
  std::optional<EvalClaim> eval;      // the held-out split after the epoch
  // A replay in a worker: the worker's peak resident set so far (what one more replay needs).
  std::uint64_t peak_rss_bytes = 0;
};
// In ctx.replayer when there is one, else in a trainer restored for it. `start` is let go once
// the trainer holds it, so that the epoch trains beside one copy of the state, not two. The
// replayed state is streamed out of the live tensors (hashed on the way) into `state_file` when
// given (a worker's answer, Replay::state_file stays null), else into a file of ctx.scratch
// (Replay::state_file), else kept in Replay::snapshot.
Result<Replay> replay_here(const CheckContext& ctx, Bytes start,
                           const std::filesystem::path* state_file = nullptr);
// The replayed state's values at `plan`'s positions, from memory or its file.
Result<fp::Fingerprint> gather_replayed(const Replay& replay, const fp::SamplePlan& plan);
// The replayed state whole, for what compares every value (tolerance mode).
Result<Bytes> replayed_bytes(const Replay& replay);
// Restores a committed state that passed check_committed_state. It can still fail to restore
// (RNG or optimizer bytes of the right size but no valid content, which LibTorch throws on);
// when this verifier can build the task's fresh state, its own setup is sound and the failure
// is the provider's: rejected. Settings this replay refuses stay input errors.
Result<std::unique_ptr<training::Trainer>> restore_committed(
    const Task& task, ByteSpan state, const training::TrainerOptions& options);
// The same into a trainer this verifier already built (so its setup is sound): a state LibTorch
// cannot load is the provider's.
Status load_committed(training::Trainer& trainer, ByteSpan state);
// A replay that failed: the provider's fault (rejected) becomes the epoch's failure, anything
// else stays an error.
Result<EpochCheck> unreplayable(PreparedEpoch prepared, const Error& replay_error);

// Fetches the committed "after" state when prepare_epoch left it and the replay missed the
// committed root (exact mode): the state is then evidence, and is checked like any other.
Status fetch_after_if_replay_missed(EvidenceSource& source, const CheckContext& ctx,
                                    PreparedEpoch& prepared, const Replay& replay);

// Compares a replay with the commitments and the fetched "after" state.
Result<EpochCheck> judge_epoch(PreparedEpoch prepared, const Replay& replay,
                               const CheckContext& ctx);

// The comparison mode and thresholds a task asks for.
fp::CompareMode compare_mode(const Task& task);
fp::Tolerance tolerance_of(const Task& task);

}  // namespace vt::verifier
