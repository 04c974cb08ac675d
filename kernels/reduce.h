#pragma once
// Reductions over any dimensions in the portable arithmetic (docs/portable.md, "Reductions"):
// the reduced elements of one output are taken in the input's storage order. Threads split
// outputs.

#include <cstdint>
#include <vector>

namespace vt::kernels {

enum class Reduction { kSum, kMean, kAmax, kLogsumexp };

// A row-major tensor of `sizes` with the dimensions flagged in `reduced` reduced. The output
// keeps the other dimensions in order (keepdim changes its shape, not its layout).
class ReduceShape {
 public:
  ReduceShape(const std::vector<std::int64_t>& sizes, const std::vector<bool>& reduced);
  std::int64_t outputs() const { return static_cast<std::int64_t>(bases_.size()); }
  std::int64_t count() const { return static_cast<std::int64_t>(offsets_.size()); }
  // Where output o's reduced elements start, and their offsets from it in storage order.
  std::int64_t base(std::int64_t o) const { return bases_[static_cast<std::size_t>(o)]; }
  const std::vector<std::int64_t>& offsets() const { return offsets_; }
  std::int64_t elements() const { return outputs() * count(); }
  const std::vector<std::int64_t>& sizes() const { return sizes_; }
  const std::vector<bool>& reduced() const { return reduced_; }

 private:
  std::vector<std::int64_t> sizes_;
  std::vector<bool> reduced_;
  std::vector<std::int64_t> bases_, offsets_;
};

void reduce(Reduction r, const ReduceShape& s, const float* x, float* y);
// dx from dy (one per output); amax and logsumexp read x and y.
void reduce_backward(Reduction r, const ReduceShape& s, const float* x, const float* y,
                     const float* dy, float* dx);

}  // namespace vt::kernels
