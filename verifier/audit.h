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
#include "verifier/source.h"

namespace vt::verifier {

struct TensorDifference {
  std::string tensor;
  std::uint64_t differing = 0;  // sampled positions that differ
  std::uint64_t sampled = 0;
  std::vector<std::uint64_t> positions;  // the first few differing flat indices
};

struct AuditFinding {
  std::uint64_t epoch = 0;
  Digest committed_root{};
  Digest replay_root{};
  bool bit_identical = false;
  bool within_tolerance = false;  // the fingerprint comparison under the task's policy
  std::int64_t steps = 0;         // steps in the epoch
  std::int64_t trail_interval = 0;
  std::optional<std::int64_t> last_matching_step;  // 0 = the epoch's start
  std::optional<std::int64_t>
      first_diverging_step;                   // a trail step; divergence lies in (last, first]
  std::vector<TensorDifference> differences;  // at first_diverging_step (or the epoch's end)
  std::string summary;
  nlohmann::json second_opinion;  // null unless audit --second-opinion ran (second_opinion.h)
};

Result<AuditFinding> audit_epoch(EvidenceSource& source, const Task& task, std::uint64_t epoch,
                                 const training::TrainerOptions& trainer);

nlohmann::json finding_to_json(const AuditFinding& f);

// Evidence: {"evidence": {...}, "signature": hex, "signer": hex}; the signature covers the
// canonical JSON of "evidence", which embeds the provider's signed records for epoch-1 and epoch.
Result<std::string> make_evidence(const AuditFinding& finding, const Task& task,
                                  const SignedRecord& before, const SignedRecord& after,
                                  const SigningKey& auditor);

struct EvidenceCheck {
  AuditFinding claimed;
  AuditFinding recomputed;
  bool agrees = false;
  std::string auditor_fingerprint;
};
// Checks the evidence's signature and the provider records inside it, then re-runs the audit
// from `source` and compares. Any edit to the file fails the signature.
Result<EvidenceCheck> check_evidence(const std::string& evidence_json, EvidenceSource& source,
                                     const Task& task, const training::TrainerOptions& trainer);

}  // namespace vt::verifier
