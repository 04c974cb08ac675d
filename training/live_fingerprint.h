#pragma once
// Fingerprints of a live training state, gathered where the state lives (on the GPU for CUDA
// tasks): the tracking fingerprint and intra-epoch trail the provider commits, and the trail an
// auditor recomputes during a replay.

#include "fingerprint/fingerprint.h"
#include "training/trainer.h"

namespace vt::provider {

Result<fp::Fingerprint> gather_live(const training::Trainer& trainer, fp::SamplePlan plan);
// Positions drawn from `seed` over the trainer's current layout.
Result<fp::Fingerprint> live_fingerprint(const training::Trainer& trainer, const Digest& seed,
                                         std::uint64_t k);

}  // namespace vt::provider
