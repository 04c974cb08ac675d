// How far the weights moved in each epoch, from the tracking fingerprints every record commits
// (docs/plan.md, "Movement"): what the challenge boosts judge.
#include "verifier/policy/movement.h"

#include <cmath>
#include <limits>

#include "common/text.h"
#include "fingerprint/compare.h"
#include "verifier/policy/probability.h"

namespace vt::verifier {
namespace {}  // namespace

Result<double> fingerprint_movement(const fp::Fingerprint& previous,
                                    const fp::Fingerprint& current) {
  if (previous.plan.tensors.size() != current.plan.tensors.size() ||
      previous.values.size() != previous.plan.tensors.size() ||
      current.values.size() != current.plan.tensors.size()) {
    return rejected("tracking fingerprints sample different tensors");
  }
  double diff2 = 0.0, norm2 = 0.0;
  for (std::size_t t = 0; t < previous.plan.tensors.size(); ++t) {
    const fp::TensorSamples& a = previous.plan.tensors[t];
    const fp::TensorSamples& b = current.plan.tensors[t];
    if (a.name != b.name || a.dtype != b.dtype || a.indices != b.indices) {
      return rejected("tracking fingerprints sample different positions in tensor '" +
                      printable(b.name) + "'");
    }
    const std::size_t width = dtype_size(a.dtype);
    if (previous.values[t].size() != a.indices.size() * width ||
        current.values[t].size() != a.indices.size() * width) {
      return rejected("tracking fingerprint values of tensor '" + printable(b.name) +
                      "' have the wrong size");
    }
    for (std::size_t i = 0; i < a.indices.size(); ++i) {
      const double x = fp::decode_value(a.dtype, previous.values[t].data() + i * width);
      const double y = fp::decode_value(a.dtype, current.values[t].data() + i * width);
      if (!std::isfinite(x) || !std::isfinite(y)) return kInf;
      diff2 += (y - x) * (y - x);
      norm2 += x * x;
    }
  }
  if (norm2 == 0.0) return diff2 == 0.0 ? 0.0 : kInf;
  return std::sqrt(diff2 / norm2);
}

Result<std::vector<double>> tracking_movements(std::span<const SignedRecord> records) {
  std::vector<double> out;
  if (records.empty()) return out;
  std::vector<fp::Fingerprint> fps;
  fps.reserve(records.size());
  for (std::size_t e = 0; e < records.size(); ++e) {
    const std::string where = "epoch " + std::to_string(e) + ": tracking_fingerprint";
    if (records[e].record.epoch != e) {
      return internal_error("tracking_movements: record " + std::to_string(e) + " holds epoch " +
                            std::to_string(records[e].record.epoch));
    }
    Result<fp::Fingerprint> f = fp::fingerprint_from_json(records[e].record.tracking_fingerprint);
    if (!f.ok()) return rejected(where + ": " + f.error().message);
    if (e > 0 && f->plan != fps[0].plan) {
      return rejected(
          where +
          ": samples other positions than epoch 0's (tracking positions are fixed per task)");
    }
    fps.push_back(std::move(f).value());
    if (e > 0) {
      Result<double> m = fingerprint_movement(fps[e - 1], fps[e]);
      if (!m.ok()) return rejected(where + ": " + m.error().message);
      out.push_back(*m);
    }
  }
  return out;
}

}  // namespace vt::verifier
