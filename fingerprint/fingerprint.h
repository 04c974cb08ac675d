#pragma once
// A fingerprint: a sample plan plus the raw little-endian bit patterns of the values at its
// positions (docs/fingerprint.md). Raw bits, not numbers, so exact comparison is bitwise and
// the JSON form is lossless for every dtype.

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "common/bytes.h"
#include "common/safetensors.h"
#include "fingerprint/sampling.h"

namespace vt {
class ThreadPool;
}

namespace vt::fp {

struct Fingerprint {
  SamplePlan plan;
  // values[i] holds plan.tensors[i].indices.size() values of plan.tensors[i].dtype, in index
  // order, each in its little-endian byte form (as stored in safetensors).
  std::vector<Bytes> values;

  bool operator==(const Fingerprint&) const = default;
};

// Reads the plan's values out of a parsed snapshot. Errors name the tensor that is missing or
// whose dtype or element count differs from the plan.
Result<Fingerprint> gather(const SamplePlan& plan, const SafetensorsView& snapshot);
// The same from a state that is not in memory: `tensors` is its header's list, and `read` fills
// `out` with the bytes of `entry` from byte `at` of its data (a file read a value at a time).
using TensorBytesReader =
    std::function<Status(const TensorEntry& entry, std::uint64_t at, std::span<std::uint8_t> out)>;
Result<Fingerprint> gather(const SamplePlan& plan, const std::vector<TensorEntry>& tensors,
                           const TensorBytesReader& read);

// Wraps values gathered elsewhere (training/ gathers on the device): one Bytes per plan tensor,
// in plan order. Errors name the tensor whose byte count is wrong or whose dtype is not one of
// F64, F32, F16, BF16.
Result<Fingerprint> fingerprint_from_values(SamplePlan plan, std::vector<Bytes> values);

// plan_samples over the snapshot's own tensors, then gather.
Result<Fingerprint> fingerprint_snapshot(const SafetensorsView& snapshot, const Digest& seed,
                                         std::uint64_t k);

// What a provider commits per epoch: the root of the canonical bytes and the fingerprint at
// positions seeded by commitment_seed(task_id, epoch, root). Rejects non-canonical bytes.
struct Commitment {
  Digest root{};
  Fingerprint fingerprint;
};
Result<Commitment> commit_snapshot(ByteSpan canonical_bytes, const Digest& task_id,
                                   std::uint64_t epoch, std::uint64_t k,
                                   ThreadPool* pool = nullptr);

// JSON form, stored in the commitment log. Canonical through vt::canonical_json:
//   {"seed":"<hex>","tensors":[{"dtype":"F32","indices":[..],"name":"..","numel":N,
//    "values":"<hex>"},..],"version":1}
nlohmann::json fingerprint_to_json(const Fingerprint& fp);
// Validates every field; errors name it: "fingerprint.tensors[2].values: ...".
Result<Fingerprint> fingerprint_from_json(const nlohmann::json& j);

}  // namespace vt::fp
