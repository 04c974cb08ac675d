#pragma once
// Audit evidence (docs/verifier.md, "The auditor"): what the auditor found about one disputed
// epoch, with the provider's own signed records for epoch-1 and epoch, signed by the auditor.
// Reading it back checks every signature and the document's shape; it needs no replay, so this
// file stays free of the trainer (fuzz_evidence builds it on its own). audit.h re-runs the audit
// a document claims.

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "protocol/keys.h"
#include "protocol/log.h"
#include "protocol/task.h"

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
  // Empty when the state the provider stores for the epoch decodes to its committed root and
  // passes the verifier's checks; else what is wrong with it. A replay can prove the epoch's
  // work while the evidence kept for it is corrupt or missing: the finding says both.
  std::string stored_state_problem;
  // Empty when the state the provider stores for epoch-1 (where the replay starts) is usable;
  // else what is wrong with it, and nothing was replayed: the finding is that the epoch cannot
  // be replayed from the provider's evidence, which fails the task as a divergence would.
  std::string start_state_problem;
  // A replay that missed the committed root was run a second time, in a fresh process with
  // scrambled memory (verifier/check/second_replay.h): its root. When the two replays differ
  // from each other, `irreproducible` says where, and the finding holds nothing against the
  // provider: the task's arithmetic does not reproduce on the auditor's machine.
  std::optional<Digest> second_replay_root;
  std::string irreproducible;
  std::string summary;
  nlohmann::json second_opinion;  // null unless audit --second-opinion ran (second_opinion.h)
};

nlohmann::json finding_to_json(const AuditFinding& f);

// Evidence: {"evidence": {...}, "signature": hex, "signer": hex}; the signature covers the
// canonical JSON of "evidence", which embeds the provider's signed records for epoch-1 and epoch.
Result<std::string> make_evidence(const AuditFinding& finding, const Task& task,
                                  const SignedRecord& before, const SignedRecord& after,
                                  const SigningKey& auditor);

struct SignedEvidence {
  AuditFinding claimed;
  std::string auditor_fingerprint;  // SHA-256 of the key that signed it
};
// Checks the auditor's signature, then the document's format and task, and the provider records
// inside it under their own signer; returns the finding it claims. Any edit to the file fails
// the signature (kRejected); a signed document of the wrong shape is kInvalidInput.
Result<SignedEvidence> read_evidence(const std::string& evidence_json, const Task& task);

}  // namespace vt::verifier
