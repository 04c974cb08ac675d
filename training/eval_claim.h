#pragma once
// Held-out metrics as the commitment log carries them (protocol/log.h, EvalClaim), and the
// bounds a tolerance-mode replay must land within (docs/datasets.md, "Held-out evaluation").

#include "protocol/log.h"
#include "training/trainer.h"

namespace vt::training {

// Tolerance mode replays with other weights bits, so held-out metrics move a little: the loss
// may differ by 1% of max(1, |loss|), the accuracy by 0.01 (one example in a hundred).
inline constexpr double kEvalLossTolerance = 0.01;
inline constexpr double kEvalAccuracyTolerance = 0.01;

inline EvalClaim eval_claim(const EvalMetrics& m) {
  EvalClaim c;
  c.loss = m.loss;
  if (m.accuracy >= 0.0) c.accuracy = m.accuracy;
  c.examples = static_cast<std::uint64_t>(m.examples);
  return c;
}

}  // namespace vt::training
