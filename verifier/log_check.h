#pragma once
// What a verifier checks before any replay: the log's signatures and chain, that it is for this
// exact task, that it holds every epoch, that epoch 0 is the initial state the task itself
// defines (no pretrained or forged start), and that the delivered final model is the last
// committed state.

#include <string>
#include <vector>

#include "protocol/task.h"
#include "training/trainer.h"
#include "verifier/source.h"

namespace vt::verifier {

struct LogFacts {
  std::vector<SignedRecord> records;
  Digest head{};
  std::string signer_fingerprint;
  Digest expected_initial_root{};
  std::vector<std::string> failures;  // each a reason to reject
  bool complete = false;              // every epoch 0..task.epochs committed
};

// The largest snapshot a provider may send for a task whose initial snapshot is `initial`
// bytes: every epoch holds the same tensors, plus optimizer state that may appear after the
// first step (at most two moments per parameter) and a little metadata.
inline std::uint64_t snapshot_size_bound(std::uint64_t initial) { return 4 * initial + (16u << 20); }

// `require_complete` is false for online checks while training still runs.
Result<LogFacts> check_log(EvidenceSource& source, const Task& task, const training::TrainerOptions& trainer,
                           bool require_complete);

// Fetches the last committed snapshot (the final model) and checks it against its root.
Status check_final_model(EvidenceSource& source, const LogFacts& facts, std::vector<std::string>& failures);

}  // namespace vt::verifier
