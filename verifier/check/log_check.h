#pragma once
// What a verifier checks before any replay: the log's signatures and chain, that it is for this
// exact task, that it holds every epoch, that epoch 0 is the initial state the task itself
// defines (no pretrained or forged start), and that the delivered final model is the last
// committed state.

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "protocol/task.h"
#include "training/trainer.h"
#include "verifier/check/epoch_check.h"
#include "verifier/source/source.h"

namespace vt::verifier {

struct LogFacts {
  std::vector<SignedRecord> records;
  Digest head{};
  std::string signer_fingerprint;   // SHA-256 of the key that signed the log (empty if unreadable)
  bool signer_pinned = false;       // it was checked against the key the verifier was given
  std::vector<TensorEntry> layout;  // the tensors of the task's states (CheckContext::layout)
  Digest expected_initial_root{};
  std::vector<std::string> failures;  // each a reason to reject
  bool complete = false;              // every epoch 0..task.epochs committed
  // The trainer that derived the initial state: the one this process replays in
  // (CheckContext::replayer), so that a verify builds one trainer per process.
  std::shared_ptr<training::Trainer> trainer;
};

// The largest snapshot a provider may send for a task whose initial snapshot is `initial`
// bytes: every epoch holds the same tensors, plus optimizer state that may appear after the
// first step (at most two moments per parameter) and a little metadata.
inline std::uint64_t snapshot_size_bound(std::uint64_t initial) {
  return 4 * initial + (16u << 20);
}

// `require_complete` is false for online checks while training still runs. `provider_key` (the
// SHA-256 of the provider's public key, hex) is the trust anchor: a log signed by any other key
// is rejected. Without it any key is taken, and the verdict says so.
// `replays` is false when this verifier cannot reproduce the provider's arithmetic environment:
// the initial state, which LibTorch's random fill gives other bits elsewhere, is then not
// compared, and everything else is.
Result<LogFacts> check_log(EvidenceSource& source, const Task& task,
                           const training::TrainerOptions& trainer, bool require_complete,
                           const std::optional<std::string>& provider_key = std::nullopt,
                           bool replays = true);

// Fetches the last committed snapshot (the final model), checks it against its root and its
// committed fingerprints (check_committed_state).
Status check_final_model(EvidenceSource& source, const LogFacts& facts, const CheckContext& ctx,
                         std::vector<std::string>& failures);

}  // namespace vt::verifier
