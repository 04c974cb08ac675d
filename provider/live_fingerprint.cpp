#include "provider/live_fingerprint.h"

namespace vt::provider {

Result<fp::Fingerprint> gather_live(const training::Trainer& trainer, fp::SamplePlan plan) {
  std::vector<Bytes> values;
  values.reserve(plan.tensors.size());
  for (const fp::TensorSamples& t : plan.tensors) {
    VT_ASSIGN_OR_RETURN(Bytes v, trainer.gather(t.name, t.indices));
    values.push_back(std::move(v));
  }
  return fp::fingerprint_from_values(std::move(plan), std::move(values));
}

Result<fp::Fingerprint> live_fingerprint(const training::Trainer& trainer, const Digest& seed, std::uint64_t k) {
  const std::vector<TensorEntry> layout = trainer.layout();
  VT_ASSIGN_OR_RETURN(fp::SamplePlan plan, fp::plan_samples(seed, std::span<const TensorEntry>(layout), k));
  return gather_live(trainer, std::move(plan));
}

}  // namespace vt::provider
