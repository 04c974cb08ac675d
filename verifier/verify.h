#pragma once
// `veritrain verify` (docs/verifier.md): check the log, draw challenges from the verifier's own
// secret randomness, re-run the challenged epochs and judge them; offline after training, or
// online while it runs.

#include <filesystem>
#include <functional>
#include <optional>
#include <string>

#include "verifier/report.h"
#include "verifier/source.h"

namespace vt::verifier {

struct VerifyOptions {
  PolicyRequest policy;
  std::optional<std::string> seed_hex;  // reproduce a run; default: OS CSPRNG
  bool online = false;                  // subscribe and check epochs as they are committed
  FetchAfter fetch_after = FetchAfter::kAuto;  // when "after" snapshots cross the network
  training::TrainerOptions trainer;
  std::chrono::milliseconds online_wait{std::chrono::minutes(30)};  // longest gap between commitments
  std::function<void(const std::string&)> on_event;  // one line per step, for people
  // Offline, independent challenged epochs replay in child processes of `replay_program` (a
  // veritrain binary), `replay_jobs` at a time (0: automatic_replay_jobs); while they run, the
  // next epochs' snapshots are fetched. Without a program, or with one job, replays run here.
  std::size_t replay_jobs = 1;
  std::filesystem::path replay_program;
};

// Errors mean the verification could not be carried out (I/O, bad options); a provider's
// failure is a verdict with accepted == false.
Result<Verdict> verify(EvidenceSource& source, const Task& task, const VerifyOptions& options);

}  // namespace vt::verifier
