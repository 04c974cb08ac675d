// Byte-level snapshot edits: what a cheater can do to canonical safetensors without any help from
// the trainer.

#include <cmath>
#include <cstring>

#include "common/safetensors.h"
#include "fingerprint/fingerprint.h"
#include "fingerprint/merkle.h"
#include "tests/adversary/cheater.h"

namespace vt::adversary {
namespace {

// SplitMix64: self-contained so that noise does not depend on any library's distributions.
std::uint64_t splitmix(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct OwnedTensors {
  std::vector<TensorSpec> specs;
  std::vector<Bytes> data;
  Metadata metadata;

  Result<Bytes> write() const {
    std::vector<TensorData> tensors;
    for (std::size_t i = 0; i < specs.size(); ++i) tensors.push_back({specs[i], data[i]});
    return write_canonical(tensors, metadata);
  }
};

Result<OwnedTensors> copy_out(ByteSpan snapshot) {
  VT_ASSIGN_OR_RETURN(SafetensorsView view, parse_safetensors(snapshot));
  OwnedTensors out;
  out.metadata = view.metadata;
  for (const TensorEntry& t : view.tensors) {
    out.specs.push_back({t.name, t.dtype, t.shape});
    ByteSpan d = view.data(t);
    out.data.emplace_back(d.begin(), d.end());
  }
  return out;
}

}  // namespace

Result<Bytes> rewrite_metadata(ByteSpan snapshot,
                               const std::map<std::string, std::string>& changes) {
  VT_ASSIGN_OR_RETURN(OwnedTensors t, copy_out(snapshot));
  for (const auto& [key, value] : changes) {
    if (!value.empty()) t.metadata[key] = value;
  }
  return t.write();
}

Result<Bytes> add_noise(ByteSpan snapshot, double relative, std::uint64_t seed) {
  VT_ASSIGN_OR_RETURN(OwnedTensors t, copy_out(snapshot));
  std::uint64_t state = seed;
  for (std::size_t i = 0; i < t.specs.size(); ++i) {
    if (t.specs[i].dtype != DType::kF32 || t.specs[i].name.rfind("param/", 0) != 0) continue;
    const std::size_t n = t.data[i].size() / 4;
    std::vector<float> w(n);
    std::memcpy(w.data(), t.data[i].data(), n * 4);
    std::vector<double> r(n);
    double norm_w = 0, norm_r = 0;
    for (std::size_t j = 0; j < n; ++j) {
      r[j] = static_cast<double>(splitmix(state) >> 11) * 0x1.0p-53 * 2.0 - 1.0;
      norm_w += static_cast<double>(w[j]) * w[j];
      norm_r += r[j] * r[j];
    }
    if (norm_w == 0 || norm_r == 0) continue;
    // Scaled so that ||noise|| / ||w|| = relative for this tensor.
    const double scale = relative * std::sqrt(norm_w / norm_r);
    for (std::size_t j = 0; j < n; ++j) w[j] = static_cast<float>(w[j] + scale * r[j]);
    std::memcpy(t.data[i].data(), w.data(), n * 4);
  }
  return t.write();
}

Result<Forgery> forge_snapshot(ByteSpan cheap, ByteSpan honest, const Digest& task_id,
                               std::uint64_t epoch, std::uint64_t k) {
  VT_ASSIGN_OR_RETURN(SafetensorsView cheap_view, parse_safetensors(cheap));
  VT_ASSIGN_OR_RETURN(SafetensorsView honest_view, parse_safetensors(honest));
  const Digest cheap_root = fp::merkle_root(cheap);
  Forgery f;
  VT_ASSIGN_OR_RETURN(f.known_plan,
                      fp::plan_samples(fp::commitment_seed(task_id, epoch, cheap_root),
                                       std::span<const TensorEntry>(cheap_view.tensors), k));
  f.bytes.assign(cheap.begin(), cheap.end());
  for (const fp::TensorSamples& s : f.known_plan.tensors) {
    const TensorEntry* c = cheap_view.find(s.name);
    const TensorEntry* h = honest_view.find(s.name);
    if (c == nullptr || h == nullptr || c->nbytes() != h->nbytes()) {
      return invalid_input("forge: tensor " + s.name +
                           " differs in layout between the cheap and the honest state");
    }
    const std::size_t width = dtype_size(s.dtype);
    for (std::uint64_t index : s.indices) {
      std::memcpy(f.bytes.data() + cheap_view.data_start + c->begin + index * width,
                  honest.data() + honest_view.data_start + h->begin + index * width, width);
    }
  }
  return f;
}

}  // namespace vt::adversary
