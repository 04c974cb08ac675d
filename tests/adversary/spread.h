#pragma once
// The honest cross-thread-count spread: one epoch trained with the task's intra-op thread count
// and replayed from the same snapshot with another, compared over every floating-point value of
// the state. What docs/tolerance.md calibrates its thresholds from.

#include <algorithm>
#include <string>

#include "common/safetensors.h"
#include "fingerprint/compare.h"
#include "training/trainer.h"

namespace vt::adversary {

struct Spread {
  double rel_l2 = 0.0;
  double max_abs_diff = 0.0;
  double max_rel_diff = 0.0;
  double differing_fraction = 0.0;  // values not bit-identical
  std::uint64_t values = 0;

  void widen(const Spread& o) {
    rel_l2 = std::max(rel_l2, o.rel_l2);
    max_abs_diff = std::max(max_abs_diff, o.max_abs_diff);
    max_rel_diff = std::max(max_rel_diff, o.max_rel_diff);
    differing_fraction = std::max(differing_fraction, o.differing_fraction);
    values = std::max(values, o.values);
  }
};

// Every element of every non-empty floating-point tensor.
inline fp::SamplePlan whole_state_plan(const SafetensorsView& view) {
  fp::SamplePlan plan;
  for (const TensorEntry& t : view.tensors) {
    if (!is_floating(t.dtype) || t.numel() == 0) continue;
    fp::TensorSamples s{t.name, t.dtype, t.numel(), {}};
    for (std::uint64_t i = 0; i < t.numel(); ++i) s.indices.push_back(i);
    plan.tensors.push_back(std::move(s));
  }
  return plan;
}

// `replay` against `reference`, both canonical snapshots of one task.
inline Result<Spread> spread_between(ByteSpan replay, ByteSpan reference) {
  VT_ASSIGN_OR_RETURN(SafetensorsView a, parse_safetensors(replay));
  VT_ASSIGN_OR_RETURN(SafetensorsView b, parse_safetensors(reference));
  const fp::SamplePlan plan = whole_state_plan(b);
  VT_ASSIGN_OR_RETURN(fp::Fingerprint fa, fp::gather(plan, a));
  VT_ASSIGN_OR_RETURN(fp::Fingerprint fb, fp::gather(plan, b));
  VT_ASSIGN_OR_RETURN(fp::Comparison c, fp::compare(fa, fb, fp::CompareMode::kExact));
  VT_ASSIGN_OR_RETURN(fp::Comparison t,
                      fp::compare(fa, fb, fp::CompareMode::kTolerance, {0, 0, 1e300, 1.0}));
  Spread s;
  s.rel_l2 = t.rel_l2;
  s.max_abs_diff = t.max_abs_diff;
  s.max_rel_diff = t.max_rel_diff;
  s.values = c.compared;
  s.differing_fraction =
      c.compared ? static_cast<double>(c.mismatches) / static_cast<double>(c.compared) : 0.0;
  return s;
}

// Trains `epochs` epochs of `task` with its own thread count, then replays each of them from the
// state before it with `threads`: the spread per epoch (index e-1). The states are all captured
// first because the thread count is process-wide.
inline Result<std::vector<Spread>> measure_spreads(const Task& task, std::int64_t threads,
                                                   std::int64_t epochs) {
  std::vector<Bytes> states;
  {
    VT_ASSIGN_OR_RETURN(auto trainer, training::Trainer::create(task));
    VT_ASSIGN_OR_RETURN(Bytes initial, trainer->snapshot());
    states.push_back(std::move(initial));
    for (std::int64_t e = 1; e <= epochs; ++e) {
      VT_RETURN_IF_ERROR(trainer->train_epoch());
      VT_ASSIGN_OR_RETURN(Bytes s, trainer->snapshot());
      states.push_back(std::move(s));
    }
  }
  training::TrainerOptions other;
  other.intra_op_threads = threads;
  std::vector<Spread> out;
  for (std::int64_t e = 1; e <= epochs; ++e) {
    VT_ASSIGN_OR_RETURN(auto replayer, training::Trainer::restore(task, states[e - 1], other));
    VT_RETURN_IF_ERROR(replayer->train_epoch());
    VT_ASSIGN_OR_RETURN(Bytes replay, replayer->snapshot());
    VT_ASSIGN_OR_RETURN(Spread s, spread_between(replay, states[e]));
    out.push_back(s);
  }
  return out;
}

}  // namespace vt::adversary
