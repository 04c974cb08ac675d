#pragma once
// Where a fingerprint samples (docs/fingerprint.md, "Positions"). A plan is derived only from a
// seed, the snapshot's tensor list (name, dtype, shape) and k, so training/ can gather the
// values on its device and this module can gather them from canonical bytes, and both agree.
//
// Only floating-point tensors (F64, F32, F16, BF16) with at least one element are sampled:
// integer and byte tensors (step counters, RNG states, data cursors) carry no weights and are
// bound by the Merkle root alone. Every sampled tensor gets at least one position; the rest of
// k is split in proportion to size. Positions within a tensor are distinct and ascending.

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/bytes.h"
#include "common/safetensors.h"
#include "common/sha256_stream.h"

namespace vt::fp {

// Every non-empty floating-point tensor gets at least this many positions.
inline constexpr std::uint64_t kMinSamplesPerTensor = 1;

// The per-epoch commitment seed: SHA-256("veritrain/fingerprint/v1" || task_id || u64le epoch
// || root). It depends on the root, so positions are unknown until every byte is fixed.
Digest commitment_seed(const Digest& task_id, std::uint64_t epoch, const Digest& root);
// Fixed for the whole task: SHA-256("veritrain/fingerprint/tracking/v1" || task_id).
Digest tracking_seed(const Digest& task_id);
// Intra-epoch trail: SHA-256("veritrain/fingerprint/trail/v1" || task_id || u64le epoch ||
// u64le step). Binds nothing (the root does); only locates the first diverging step.
Digest trail_seed(const Digest& task_id, std::uint64_t epoch, std::uint64_t step);

// The PRF stream of one tensor: the Sha256Stream keyed by seed || u64le len(name) || name, so
// block j = SHA-256(seed || u64le len(name) || name || u64le j).
class PrfStream : public Sha256Stream {
 public:
  PrfStream(const Digest& seed, std::string_view name);
};

struct TensorSamples {
  std::string name;
  DType dtype = DType::kF32;
  std::uint64_t numel = 0;
  std::vector<std::uint64_t> indices;  // flat row-major element indices, distinct, ascending

  bool operator==(const TensorSamples&) const = default;
};

struct SamplePlan {
  Digest seed{};
  std::vector<TensorSamples> tensors;  // the sampled tensors, sorted by name (bytewise)

  std::uint64_t count() const;  // k: total positions
  bool operator==(const SamplePlan&) const = default;
};

// The plan for `k` positions over `tensors` (any order). Errors: k == 0; two tensors with one
// name; a negative or overflowing shape; no non-empty floating-point tensor; k larger than the
// floating-point elements; k smaller than the number of non-empty floating-point tensors.
Result<SamplePlan> plan_samples(const Digest& seed, std::span<const TensorSpec> tensors,
                                std::uint64_t k);
Result<SamplePlan> plan_samples(const Digest& seed, std::span<const TensorEntry> tensors,
                                std::uint64_t k);

}  // namespace vt::fp
