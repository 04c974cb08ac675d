#pragma once
// The auditor (docs/verifier.md): replays one disputed epoch offline from stored artifacts. If the
// replay diverges, the committed intra-epoch trail (a fingerprint every m steps) locates the
// first diverging step; the tensors and positions that differ there are reported. Evidence is
// canonical JSON signed by the auditor, carrying the provider's own signed records, so a third
// party can check it and re-run it.

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "fingerprint/compare.h"
#include "protocol/keys.h"
#include "protocol/task.h"
#include "training/trainer.h"
#include "verifier/audit/evidence.h"
#include "verifier/source/source.h"

namespace vt::verifier {

// A replay that misses the committed root is run again before the finding stands, in a fresh
// `replay-worker` of `second_replay_program` (in this process when empty): replays that differ
// from each other make the finding `irreproducible`, never a divergence.
Result<AuditFinding> audit_epoch(EvidenceSource& source, const Task& task, std::uint64_t epoch,
                                 const training::TrainerOptions& trainer,
                                 const std::filesystem::path& second_replay_program = {});

struct EvidenceCheck {
  AuditFinding claimed;
  AuditFinding recomputed;
  bool agrees = false;
  std::string auditor_fingerprint;
};
// read_evidence, then the audit re-run from `source` and compared with the claimed finding.
Result<EvidenceCheck> check_evidence(const std::string& evidence_json, EvidenceSource& source,
                                     const Task& task, const training::TrainerOptions& trainer,
                                     const std::filesystem::path& second_replay_program = {});

}  // namespace vt::verifier
