#pragma once
// `veritrain verify` (docs/verifier.md): check the log, draw challenges from the verifier's own
// secret randomness, re-run the challenged epochs and judge them; offline after training, or
// online while it runs.

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "training/environment.h"
#include "verifier/report/verdict.h"
#include "verifier/source/source.h"

namespace vt::verifier {

// How far a verification has come, for a progress bar: `judged` of the `challenged` epochs have
// a result. Online, later epochs may still be challenged: `final` is false until all are drawn.
struct VerifyProgress {
  std::size_t judged = 0;
  std::size_t challenged = 0;
  bool final = false;
  std::uint64_t epoch = 0;  // the epoch just judged; 0 at the start
};

struct VerifyOptions {
  PolicyRequest policy;
  std::optional<std::string> seed_hex;         // reproduce a run; default: OS CSPRNG
  bool online = false;                         // subscribe and check epochs as they are committed
  FetchAfter fetch_after = FetchAfter::kAuto;  // when "after" snapshots cross the network
  training::TrainerOptions trainer;
  std::chrono::milliseconds online_wait{
      std::chrono::minutes(30)};                     // longest gap between commitments
  std::function<void(const std::string&)> on_event;  // one line per step, for people
  std::function<void(const VerifyProgress&)>
      on_progress;  // at the start and after each judged epoch
  // Offline, independent challenged epochs replay in child processes of `replay_program` (a
  // veritrain binary), `replay_jobs` at a time (0: automatic_replay_jobs); while they run, the
  // next epochs' snapshots are fetched. Without a program, or with one job, replays run here.
  std::size_t replay_jobs = 1;
  std::filesystem::path replay_program;
  // The trust anchor: SHA-256 of the provider's public signing key (parse_provider_key). A log
  // signed by another key is rejected; without it the verdict says the key was not pinned.
  std::optional<std::string> provider_key;
  // Offline: keep the sealed challenges and every judged epoch here as it finishes
  // (verify_state.h), so that an interrupted run can be resumed; empty: keep nothing.
  std::filesystem::path state_dir;
  // This process matched to the provider's committed arithmetic environment
  // (adopt_committed_environment, called before anything ran LibTorch kernels here). With
  // unmatched conditions no epoch is replayed and the verdict is inconclusive unless the log
  // itself fails. nullopt: nothing was matched (no environment committed; the log check says so).
  std::optional<training::EnvironmentMatch> environment;
  // Continue the run whose state is in state_dir: the same policy and seed (so the same
  // challenges, given the same log), and no replay of an epoch already judged.
  bool resume = false;
  // States of this many canonical bytes or more wait on disk, not in memory, between the fetch
  // and their use, and in exact mode the state after an epoch replayed here is fetched once its
  // replay let go of the start (docs/verifier.md, "Memory"). Tests lower it to reach those paths
  // with small tasks.
  std::uint64_t large_state_bytes = kLargeStateBytes;
  // The memory automatic --jobs sizes replays against; 0: what the kernel calls available now.
  std::uint64_t available_memory = 0;
};

// Errors mean the verification could not be carried out: the verifier's own inputs (its task,
// its options) or its own machine (a local disk). Everything the provider got wrong, withheld
// evidence included, is a verdict with accepted == false that names the epoch.
Result<Verdict> verify(EvidenceSource& source, const Task& task, const VerifyOptions& options);

}  // namespace vt::verifier
