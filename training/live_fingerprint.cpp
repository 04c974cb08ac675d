#include "training/live_fingerprint.h"

namespace vt::provider {

Result<fp::Fingerprint> gather_live(const training::Trainer& trainer, fp::SamplePlan plan) {
  std::vector<training::Trainer::GatherRequest> requests;
  requests.reserve(plan.tensors.size());
  for (const fp::TensorSamples& t : plan.tensors) requests.push_back({t.name, t.indices});
  VT_ASSIGN_OR_RETURN(std::vector<Bytes> values, trainer.gather_many(requests));
  return fp::fingerprint_from_values(std::move(plan), std::move(values));
}

Result<fp::Fingerprint> live_fingerprint(const training::Trainer& trainer, const Digest& seed,
                                         std::uint64_t k) {
  const std::vector<TensorEntry> layout = trainer.layout();
  VT_ASSIGN_OR_RETURN(fp::SamplePlan plan,
                      fp::plan_samples(seed, std::span<const TensorEntry>(layout), k));
  return gather_live(trainer, std::move(plan));
}

}  // namespace vt::provider
