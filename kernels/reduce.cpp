#include "kernels/reduce.h"

#include <array>
#include <string>

#include "kernels/parallel.h"
#include "kernels/scalar.h"
#include "kernels/trace.h"

namespace vt::kernels {
namespace {

// Every offset of the elements of the dimensions flagged `pick`, in row-major order.
std::vector<std::int64_t> offsets_of(const std::vector<std::int64_t>& sizes,
                                     const std::vector<bool>& pick) {
  std::vector<std::int64_t> strides(sizes.size(), 1);
  for (std::size_t d = sizes.size(); d-- > 1;) strides[d - 1] = strides[d] * sizes[d];
  std::vector<std::int64_t> out = {0};
  for (std::size_t d = 0; d < sizes.size(); ++d) {
    if (!pick[d]) continue;
    std::vector<std::int64_t> next;
    next.reserve(out.size() * static_cast<std::size_t>(sizes[d]));
    for (const std::int64_t base : out) {
      for (std::int64_t i = 0; i < sizes[d]; ++i) next.push_back(base + i * strides[d]);
    }
    out.swap(next);
  }
  return out;
}

bool is_nan(float v) { return v != v; }
constexpr float kInf = __builtin_inff();

float max_of(const float* x, const std::vector<std::int64_t>& offsets) {
  float m = x[offsets[0]];
  for (std::size_t i = 1; i < offsets.size(); ++i) {
    const float v = x[offsets[i]];
    if (v > m || is_nan(v)) m = v;
  }
  return m;
}

// The trace's parameters of a reduction (docs/dispute.md): its kind, the input's rank, then
// size_d and reduced_d for each dimension d (names with static storage: a trace keeps views).
constexpr std::size_t kMaxTracedRank = 64;
std::string_view dimension_name(const char* what, std::size_t d) {
  static const auto names = [] {
    std::array<std::array<std::string, kMaxTracedRank>, 2> out;
    for (std::size_t i = 0; i < kMaxTracedRank; ++i) {
      out[0][i] = "size_" + std::to_string(i);
      out[1][i] = "reduced_" + std::to_string(i);
    }
    return out;
  }();
  return names[what[0] == 's' ? 0 : 1][d];
}
// Built only while a trace records: a reduction off the trace allocates nothing for it.
std::vector<trace::Param> reduce_params(Reduction r, const ReduceShape& s) {
  if (!trace::active()) return {};
  std::vector<trace::Param> params = {trace::integer("kind", static_cast<std::int64_t>(r)),
                                      trace::integer("rank", std::ssize(s.sizes()))};
  for (std::size_t d = 0; d < s.sizes().size() && d < kMaxTracedRank; ++d) {
    params.push_back(trace::integer(dimension_name("size", d), s.sizes()[d]));
    params.push_back(trace::integer(dimension_name("reduced", d), s.reduced()[d] ? 1 : 0));
  }
  return params;
}

}  // namespace

ReduceShape::ReduceShape(const std::vector<std::int64_t>& sizes, const std::vector<bool>& reduced) {
  sizes_ = sizes;
  reduced_ = reduced;
  std::vector<bool> kept(reduced.size());
  for (std::size_t d = 0; d < reduced.size(); ++d) kept[d] = !reduced[d];
  bases_ = offsets_of(sizes, kept);
  offsets_ = offsets_of(sizes, reduced);
}

void reduce(Reduction r, const ReduceShape& s, const float* x, float* y) {
  const auto params = reduce_params(r, s);
  trace::Call traced("reduce", params, std::array{trace::f32("x", x, s.elements())});
  const std::vector<std::int64_t>& off = s.offsets();
  const float count = static_cast<float>(s.count());
  parallel_for(s.outputs(), 64, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t o = begin; o < end; ++o) {
      const float* xo = x + s.base(o);
      if (r == Reduction::kAmax) {
        y[o] = max_of(xo, off);
        continue;
      }
      float m = 0.0f;
      if (r == Reduction::kLogsumexp) {
        m = max_of(xo, off);
        if (m == kInf || m == -kInf) m = 0.0f;
      }
      float sum = 0.0f;
      for (const std::int64_t i : off)
        sum = sum + (r == Reduction::kLogsumexp ? vt_exp(xo[i] - m) : xo[i]);
      y[o] = r == Reduction::kSum ? sum : r == Reduction::kMean ? sum / count : vt_log(sum) + m;
    }
  });
  traced.outputs({trace::f32("y", y, s.outputs())});
}

void reduce_backward(Reduction r, const ReduceShape& s, const float* x, const float* y,
                     const float* dy, float* dx) {
  const auto params = reduce_params(r, s);
  const bool reads_values = r == Reduction::kAmax || r == Reduction::kLogsumexp;
  trace::Call traced("reduce_backward", params,
                     std::array{trace::f32_or_none("x", reads_values ? x : nullptr, s.elements()),
                                trace::f32_or_none("y", reads_values ? y : nullptr, s.outputs()),
                                trace::f32("dy", dy, s.outputs())});
  const std::vector<std::int64_t>& off = s.offsets();
  const float count = static_cast<float>(s.count());
  parallel_for(s.outputs(), 64, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t o = begin; o < end; ++o) {
      const std::int64_t b = s.base(o);
      switch (r) {
        case Reduction::kSum:
          for (const std::int64_t i : off) dx[b + i] = dy[o];
          break;
        case Reduction::kMean: {
          const float share = dy[o] / count;
          for (const std::int64_t i : off) dx[b + i] = share;
          break;
        }
        case Reduction::kAmax: {
          std::int64_t ties = 0;
          for (const std::int64_t i : off) ties += x[b + i] == y[o];
          const float share = dy[o] / static_cast<float>(ties);
          for (const std::int64_t i : off) dx[b + i] = x[b + i] == y[o] ? share : 0.0f;
          break;
        }
        case Reduction::kLogsumexp:
          for (const std::int64_t i : off) dx[b + i] = dy[o] * vt_exp(x[b + i] - y[o]);
          break;
      }
    }
  });
  traced.outputs({trace::f32("dx", dx, s.elements())});
}

}  // namespace vt::kernels
