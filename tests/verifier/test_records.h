#pragma once
// Minimal commitment records for the policy and report tests: only the fields the challenge
// policy reads (epoch, tracking fingerprint, loss) are filled in.

#include <cstring>
#include <vector>

#include <nlohmann/json.hpp>

#include "fingerprint/fingerprint.h"
#include "protocol/log.h"

namespace vt::testing {

// One record per entry, epoch i holding a tracking fingerprint of tensor "w" (F32, 16
// elements) sampled at positions 0..k-1 with the given values.
inline std::vector<SignedRecord> records_with_tracking(
    const std::vector<std::vector<float>>& values) {
  std::vector<SignedRecord> out;
  for (std::size_t e = 0; e < values.size(); ++e) {
    fp::SamplePlan plan;
    plan.seed.fill(7);
    fp::TensorSamples t;
    t.name = "w";
    t.dtype = DType::kF32;
    t.numel = 16;
    for (std::uint64_t i = 0; i < values[e].size(); ++i) t.indices.push_back(i);
    plan.tensors.push_back(t);
    Bytes raw(values[e].size() * 4);
    std::memcpy(raw.data(), values[e].data(),
                raw.size());  // little-endian hosts only, as the project
    Result<fp::Fingerprint> f = fp::fingerprint_from_values(plan, {raw});
    SignedRecord r;
    r.record.epoch = e;
    r.record.tracking_fingerprint = fp::fingerprint_to_json(*f);
    r.record.metrics.loss = 2.0 / static_cast<double>(e + 1);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace vt::testing
