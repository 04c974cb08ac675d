#include "fingerprint/sampling.h"

#include <algorithm>
#include <numeric>
#include <unordered_set>

#include "common/sha256.h"

namespace vt::fp {
namespace {

Sha256& domain(Sha256& h, std::string_view tag) { return h.update(tag); }

Digest hash_with_u64s(std::string_view tag, const Digest& task_id,
                      std::initializer_list<std::uint64_t> words) {
  Sha256 h;
  domain(h, tag).update(ByteSpan(task_id));
  for (std::uint64_t w : words) {
    std::uint8_t buf[8];
    put_u64le(buf, w);
    h.update(ByteSpan(buf, 8));
  }
  return h.finish();
}

// Floyd's algorithm: `count` distinct positions in [0, numel) with exactly `count` draws, so
// the cost never depends on how close count is to numel.
std::vector<std::uint64_t> distinct_positions(PrfStream& prf, std::uint64_t numel,
                                              std::uint64_t count) {
  std::unordered_set<std::uint64_t> chosen;
  chosen.reserve(count * 2);
  std::vector<std::uint64_t> out;
  out.reserve(count);
  for (std::uint64_t j = numel - count; j < numel; ++j) {
    std::uint64_t t = prf.uniform(j + 1);
    std::uint64_t pick = chosen.insert(t).second ? t : j;
    if (pick == j) chosen.insert(j);
    out.push_back(pick);
  }
  std::sort(out.begin(), out.end());
  return out;
}

struct Eligible {
  const TensorSpec* spec;
  std::uint64_t numel;
  std::uint64_t count = 0;
};

// Splits `k` over `tensors`: kMinSamplesPerTensor each, the rest R in proportion to each
// tensor's remaining capacity c = numel - min (largest remainder; ties to the earlier name).
// With C = sum of c, share = floor(R * c / C) and the fractional parts decide who gets one more;
// since R <= C nobody exceeds its numel.
void allocate(std::vector<Eligible>& tensors, std::uint64_t k) {
  using u128 = unsigned __int128;
  std::uint64_t capacity = 0;
  for (Eligible& e : tensors) {
    e.count = std::min(e.numel, kMinSamplesPerTensor);
    capacity += e.numel - e.count;
  }
  const std::uint64_t base =
      std::accumulate(tensors.begin(), tensors.end(), std::uint64_t{0},
                      [](std::uint64_t s, const Eligible& e) { return s + e.count; });
  const std::uint64_t rest = k - base;
  if (rest == 0) return;
  std::vector<std::uint64_t> remainder(tensors.size());
  std::uint64_t given = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    u128 scaled = static_cast<u128>(rest) * (tensors[i].numel - tensors[i].count);
    std::uint64_t share = static_cast<std::uint64_t>(scaled / capacity);
    remainder[i] = static_cast<std::uint64_t>(scaled % capacity);
    tensors[i].count += share;
    given += share;
  }
  std::vector<std::size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return remainder[a] > remainder[b]; });
  for (std::size_t i = 0; given < rest; ++i, ++given) tensors[order[i]].count += 1;
}

}  // namespace

Digest commitment_seed(const Digest& task_id, std::uint64_t epoch, const Digest& root) {
  Sha256 h;
  std::uint8_t buf[8];
  put_u64le(buf, epoch);
  return domain(h, "veritrain/fingerprint/v1")
      .update(ByteSpan(task_id))
      .update(ByteSpan(buf, 8))
      .update(ByteSpan(root))
      .finish();
}

Digest tracking_seed(const Digest& task_id) {
  return hash_with_u64s("veritrain/fingerprint/tracking/v1", task_id, {});
}

Digest trail_seed(const Digest& task_id, std::uint64_t epoch, std::uint64_t step) {
  return hash_with_u64s("veritrain/fingerprint/trail/v1", task_id, {epoch, step});
}

namespace {

Bytes tensor_prefix(const Digest& seed, std::string_view name) {
  Bytes prefix(seed.begin(), seed.end());
  append_u64le(prefix, name.size());
  append_bytes(prefix, as_bytes(name));
  return prefix;
}

}  // namespace

PrfStream::PrfStream(const Digest& seed, std::string_view name)
    : Sha256Stream(tensor_prefix(seed, name)) {}

std::uint64_t SamplePlan::count() const {
  std::uint64_t n = 0;
  for (const TensorSamples& t : tensors) n += t.indices.size();
  return n;
}

Result<SamplePlan> plan_samples(const Digest& seed, std::span<const TensorSpec> tensors,
                                std::uint64_t k) {
  if (k == 0) return invalid_input("fingerprint: k must be at least 1");
  std::vector<const TensorSpec*> sorted;
  for (const TensorSpec& t : tensors) sorted.push_back(&t);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->name < b->name; });
  std::vector<Eligible> eligible;
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const TensorSpec& t = *sorted[i];
    if (i > 0 && sorted[i - 1]->name == t.name) {
      return invalid_input("fingerprint: tensor \"" + t.name + "\" appears twice");
    }
    std::uint64_t numel = 1;
    for (std::int64_t d : t.shape) {
      auto ud = static_cast<std::uint64_t>(d);
      if (d < 0 || (ud != 0 && numel > UINT64_MAX / ud)) {
        return invalid_input("fingerprint: tensor \"" + t.name + "\" has an invalid shape");
      }
      numel *= ud;
    }
    if (!is_floating(t.dtype) || numel == 0) continue;
    if (total > UINT64_MAX - numel) return invalid_input("fingerprint: element count overflows");
    total += numel;
    eligible.push_back({&t, numel});
  }
  if (eligible.empty()) {
    return invalid_input("fingerprint: no tensor to sample; " + std::to_string(tensors.size()) +
                         " tensors but none is F64, F32, F16 or BF16 with at least one element");
  }
  if (k > total) {
    return invalid_input("fingerprint: k = " + std::to_string(k) + " exceeds the " +
                         std::to_string(total) + " floating-point elements of the snapshot");
  }
  if (k < eligible.size() * kMinSamplesPerTensor) {
    return invalid_input("fingerprint: k = " + std::to_string(k) + " is below the minimum " +
                         std::to_string(eligible.size() * kMinSamplesPerTensor) + " (" +
                         std::to_string(kMinSamplesPerTensor) +
                         " per non-empty floating-point tensor, " +
                         std::to_string(eligible.size()) + " tensors)");
  }
  allocate(eligible, k);
  SamplePlan plan{seed, {}};
  plan.tensors.reserve(eligible.size());
  for (const Eligible& e : eligible) {
    PrfStream prf(seed, e.spec->name);
    plan.tensors.push_back(
        {e.spec->name, e.spec->dtype, e.numel, distinct_positions(prf, e.numel, e.count)});
  }
  return plan;
}

Result<SamplePlan> plan_samples(const Digest& seed, std::span<const TensorEntry> tensors,
                                std::uint64_t k) {
  std::vector<TensorSpec> specs;
  specs.reserve(tensors.size());
  for (const TensorEntry& t : tensors) specs.push_back({t.name, t.dtype, t.shape});
  return plan_samples(seed, std::span<const TensorSpec>(specs), k);
}

}  // namespace vt::fp
