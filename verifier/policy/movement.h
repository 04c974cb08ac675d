#pragma once
// How far the tracking fingerprint moved in each epoch: what the challenge policy boosts on
// (docs/plan.md; the rule itself: verifier/policy/challenges.h).

#include <span>
#include <vector>

#include "common/result.h"
#include "fingerprint/fingerprint.h"
#include "protocol/log.h"

namespace vt::verifier {

// Relative L2 distance between two tracking fingerprints. Errors (rejected) when they do not
// sample the same positions. NaN/Inf values give +Inf; 0/0 gives 0.
Result<double> fingerprint_movement(const fp::Fingerprint& previous,
                                    const fp::Fingerprint& current);

// movement(e) for e = 1..records.size()−1 (index e−1), from each record's
// tracking_fingerprint. records[i] must be epoch i. Errors name the epoch whose tracking
// fingerprint does not parse or samples other positions than epoch 0's.
Result<std::vector<double>> tracking_movements(std::span<const SignedRecord> records);

}  // namespace vt::verifier
