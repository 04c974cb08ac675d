#pragma once
// Re-derives a fingerprint plan from its own seed, tensors and count and rejects
// (Errc::kRejected) any difference: the sampling tests' way of saying a plan is the one its seed
// gives. (The verifier compares a committed plan with the one the task derives instead.)

#include <string>
#include <vector>

#include "fingerprint/sampling.h"

namespace vt::fp {

inline Status check_plan(const SamplePlan& plan) {
  std::vector<TensorSpec> specs;
  for (const TensorSamples& t : plan.tensors) {
    specs.push_back({t.name, t.dtype, {static_cast<std::int64_t>(t.numel)}});
  }
  auto expected = plan_samples(plan.seed, std::span<const TensorSpec>(specs), plan.count());
  if (!expected.ok())
    return rejected("fingerprint plan is not derivable: " + expected.error().message);
  if (expected->tensors.size() != plan.tensors.size()) {
    return rejected("fingerprint plan: lists " + std::to_string(plan.tensors.size()) +
                    " tensors, of which " + std::to_string(expected->tensors.size()) +
                    " are non-empty floating-point tensors");
  }
  for (std::size_t i = 0; i < plan.tensors.size(); ++i) {
    const TensorSamples& got = plan.tensors[i];
    const TensorSamples& want = expected->tensors[i];
    if (got.name != want.name) {
      return rejected("fingerprint plan: tensor " + std::to_string(i) + " is \"" + got.name +
                      "\", expected \"" + want.name + "\"");
    }
    if (got.indices != want.indices) {
      return rejected("fingerprint plan: tensor \"" + got.name +
                      "\" samples other positions than its seed gives");
    }
  }
  return {};
}

}  // namespace vt::fp
