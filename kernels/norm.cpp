#include "kernels/norm.h"

#include <algorithm>
#include <cmath>

#include "kernels/parallel.h"
#include "kernels/trace.h"
#include "kernels/wide.h"

namespace vt::kernels {
namespace {

// Mean and variance of the n values at x: two chains in order, the second over the squared
// deviations from the first's mean.
void moments(const float* x, std::int64_t n, float& mean, float& var) {
  const float count = static_cast<float>(n);
  float sum = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) sum = sum + x[i];
  mean = sum / count;
  float squares = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float d = x[i] - mean;
    squares = squares + d * d;
  }
  var = squares / count;
}

// Batch norm's sums (docs/portable.md, "BatchNorm2d, training"): a channel's n values in (b, s)
// order go to kLanes lanes by their index mod kLanes, each lane one chain; then the lanes are
// summed pairwise, (0 ⊕ 1), (2 ⊕ 3), ..., and those pairwise again, down to one. Sixteen lanes
// fill one AVX-512 register, two AVX2 ones, four SSE ones: the same sums at every width. The
// channels of a group of kGroup advance side by side, so that independent chains fill the
// adder's pipeline.
constexpr std::int64_t kGroup = 8;
constexpr int kLanes = 16;
typedef float Lanes __attribute__((vector_size(kLanes * sizeof(float))));

// (Lanes pass by reference: by value, their ABI would depend on the instruction set.)
float lane_total(const Lanes& lanes) {
  float t[kLanes];
  __builtin_memcpy(t, &lanes, sizeof t);
  for (int width = kLanes / 2; width >= 1; width /= 2) {
    for (std::size_t l = 0; l < static_cast<std::size_t>(width); ++l)
      t[l] = t[2 * l] + t[2 * l + 1];
  }
  return t[0];
}

// Lanes lo ≤ l < hi hold row[l − lo]; the others `absent`, a value whose part in every sum is
// a zero: adding +0.0 or −0.0 changes no lane, whose chain from +0.0 is never −0.0.
inline void lanes_of(const float* row, int lo, int hi, float absent, Lanes& v) {
  if (lo == 0 && hi == kLanes) {
    __builtin_memcpy(&v, row, sizeof v);
    return;
  }
  for (int l = 0; l < kLanes; ++l) v[l] = l >= lo && l < hi ? row[l - lo] : absent;
}

// Row b of a channel (channel-wide indices b·S + s) cut at lane-chunk borders: fold(p, lo, hi)
// takes positions p ... p + (hi − lo) − 1 into lanes lo ... hi − 1.
template <class Fold>
inline void lane_chunks(std::int64_t b, std::int64_t spatial, Fold fold) {
  int lane = static_cast<int>(b * spatial % kLanes);
  for (std::int64_t p = 0; p < spatial; lane = 0) {
    const int hi = static_cast<int>(std::min<std::int64_t>(kLanes, lane + (spatial - p)));
    fold(p, lane, hi);
    p += hi - lane;
  }
}

// Where channel c0 + u of example b starts; channels past the group's g stand in for channel
// c0, so that every group runs kGroup chains in registers (their sums are dropped).
inline const float* channel_row(const BatchNormShape& s, const float* x, std::int64_t b,
                                std::int64_t c0, std::int64_t u, std::int64_t g) {
  return x + (b * s.channels + c0 + (u < g ? u : 0)) * s.spatial;
}

// Σ x and then Σ (x ⊖ mean)² for channels [c0, c0 + g).
VT_WIDE void moments_by_lanes(const BatchNormShape& s, const float* x, std::int64_t c0,
                              std::int64_t g, float* mean, float* var) {
  const float count = static_cast<float>(s.batch * s.spatial);
  Lanes sum[kGroup] = {}, squares[kGroup] = {};
  float m[kGroup] = {};
  for (std::int64_t b = 0; b < s.batch; ++b) {
    lane_chunks(b, s.spatial, [&](std::int64_t p, int lo, int hi) {
      for (std::int64_t u = 0; u < kGroup; ++u) {
        Lanes v;
        lanes_of(channel_row(s, x, b, c0, u, g) + p, lo, hi, 0.0f, v);
        sum[u] = sum[u] + v;
      }
    });
  }
  for (std::int64_t u = 0; u < kGroup; ++u) m[u] = lane_total(sum[u]) / count;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    lane_chunks(b, s.spatial, [&](std::int64_t p, int lo, int hi) {
      for (std::int64_t u = 0; u < kGroup; ++u) {
        Lanes v;
        lanes_of(channel_row(s, x, b, c0, u, g) + p, lo, hi, m[u], v);
        const Lanes d = v - m[u];
        squares[u] = squares[u] + d * d;
      }
    });
  }
  for (std::int64_t u = 0; u < g; ++u) {
    mean[u] = m[u];
    var[u] = lane_total(squares[u]) / count;
  }
}

// y = ((x ⊖ mean) ⊗ inv) ⊗ w ⊕ bias over one channel's values.
VT_WIDE void normalize(const BatchNormShape& s, const float* x, std::int64_t c, float m, float inv,
                       float w, float bias, bool relu, float* y) {
  for (std::int64_t b = 0; b < s.batch; ++b) {
    const float* __restrict in = x + (b * s.channels + c) * s.spatial;
    float* __restrict out = y + (b * s.channels + c) * s.spatial;
    if (relu) {  // pointwise.h's relu of the same values
      for (std::int64_t p = 0; p < s.spatial; ++p) {
        const float v = ((in[p] - m) * inv) * w + bias;
        out[p] = v <= 0.0f ? 0.0f : v;
      }
    } else {
      for (std::int64_t p = 0; p < s.spatial; ++p) out[p] = ((in[p] - m) * inv) * w + bias;
    }
  }
}

// Backward's four sums for channels [c0, c0 + g): Σ dy, Σ dy ⊗ x̂, Σ dx̂, Σ dx̂ ⊗ x̂, four
// channels at a time (sixteen chains in registers).
VT_WIDE void gradient_sums(const BatchNormShape& s, const float* x, const float* dy,
                           const float* relu_y, std::int64_t c0, std::int64_t g, const float* m,
                           const float* inv, const float* w, float (*sums)[kGroup]) {
  constexpr std::int64_t kAtOnce = 4;
  for (std::int64_t u0 = 0; u0 < g; u0 += kAtOnce) {
    Lanes sum_dy[kAtOnce] = {}, sum_dy_xhat[kAtOnce] = {}, sum_dxhat[kAtOnce] = {},
          sum_dxhat_xhat[kAtOnce] = {};
    for (std::int64_t b = 0; b < s.batch; ++b) {
      lane_chunks(b, s.spatial, [&](std::int64_t p, int lo, int hi) {
        for (std::int64_t k = 0; k < kAtOnce; ++k) {
          const std::int64_t u = u0 + k < g ? u0 + k : 0;
          // An absent lane has x = mean and dy = 0: x̂ = 0, and every term a zero.
          Lanes xv, gv;
          lanes_of(channel_row(s, x, b, c0, u, g) + p, lo, hi, m[u], xv);
          lanes_of(channel_row(s, dy, b, c0, u, g) + p, lo, hi, 0.0f, gv);
          if (relu_y != nullptr) {  // relu_backward: +0.0 where the relu's output is <= 0
            Lanes yv;
            lanes_of(channel_row(s, relu_y, b, c0, u, g) + p, lo, hi, 1.0f, yv);
            gv = yv <= 0.0f ? Lanes{} : gv;
          }
          const Lanes xhat = (xv - m[u]) * inv[u];
          const Lanes dxhat = gv * w[u];
          sum_dy[k] = sum_dy[k] + gv;
          sum_dy_xhat[k] = sum_dy_xhat[k] + gv * xhat;
          sum_dxhat[k] = sum_dxhat[k] + dxhat;
          sum_dxhat_xhat[k] = sum_dxhat_xhat[k] + dxhat * xhat;
        }
      });
    }
    for (std::int64_t k = 0; k < kAtOnce && u0 + k < g; ++k) {
      sums[0][u0 + k] = lane_total(sum_dy[k]);
      sums[1][u0 + k] = lane_total(sum_dy_xhat[k]);
      sums[2][u0 + k] = lane_total(sum_dxhat[k]);
      sums[3][u0 + k] = lane_total(sum_dxhat_xhat[k]);
    }
  }
}

// dx = (inv ⊘ n) ⊗ (((n ⊗ dx̂) ⊖ S1) ⊖ x̂ ⊗ S2) over one channel's values.
VT_WIDE void input_gradient(const BatchNormShape& s, const float* x, const float* dy,
                            const float* relu_y, std::int64_t c, float m, float inv, float w,
                            float s1, float s2, float* dx) {
  const float count = static_cast<float>(s.batch * s.spatial);
  const float k = inv / count;
  for (std::int64_t b = 0; b < s.batch; ++b) {
    const std::int64_t at = (b * s.channels + c) * s.spatial;
    const float* __restrict in = x + at;
    const float* __restrict gr = dy + at;
    float* __restrict out = dx + at;
    if (relu_y != nullptr) {
      const float* __restrict y = relu_y + at;
      for (std::int64_t p = 0; p < s.spatial; ++p) {
        const float g = y[p] <= 0.0f ? 0.0f : gr[p];
        const float xhat = (in[p] - m) * inv;
        out[p] = k * ((count * (g * w) - s1) - xhat * s2);
      }
    } else {
      for (std::int64_t p = 0; p < s.spatial; ++p) {
        const float xhat = (in[p] - m) * inv;
        out[p] = k * ((count * (gr[p] * w) - s1) - xhat * s2);
      }
    }
  }
}

}  // namespace

void batch_norm_train(const BatchNormShape& s, const float* x, const float* weight,
                      const float* bias, float eps, float momentum, float* running_mean,
                      float* running_var, float* y, float* mean, float* invstd, bool relu) {
  const std::int64_t numel = s.batch * s.channels * s.spatial, chans = s.channels;
  trace::Call traced("batch_norm_train",
                     {trace::integer("batch", s.batch), trace::integer("channels", s.channels),
                      trace::integer("spatial", s.spatial), trace::real("eps", eps),
                      trace::real("momentum", momentum), trace::integer("relu", relu)},
                     {trace::f32("x", x, numel), trace::f32_or_none("weight", weight, chans),
                      trace::f32_or_none("bias", bias, chans),
                      trace::f32_or_none("running_mean", running_mean, chans),
                      trace::f32_or_none("running_var", running_var, chans)});
  const float count = static_cast<float>(s.batch * s.spatial);
  const float keep = 1.0f - momentum;
  const float unbias = count / (count - 1.0f);
  const std::int64_t groups = (s.channels + kGroup - 1) / kGroup;
  parallel_for(groups, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t group = begin; group < end; ++group) {
      const std::int64_t c0 = group * kGroup, g = std::min(kGroup, s.channels - c0);
      float m[kGroup] = {}, var[kGroup] = {};
      moments_by_lanes(s, x, c0, g, m, var);
      for (std::int64_t u = 0; u < g; ++u) {
        const std::int64_t c = c0 + u;
        const float inv = 1.0f / std::sqrt(var[u] + eps);
        mean[c] = m[u];
        invstd[c] = inv;
        normalize(s, x, c, m[u], inv, weight != nullptr ? weight[c] : 1.0f,
                  bias != nullptr ? bias[c] : 0.0f, relu, y);
        if (running_mean != nullptr) running_mean[c] = keep * running_mean[c] + momentum * m[u];
        if (running_var != nullptr)
          running_var[c] = keep * running_var[c] + momentum * (var[u] * unbias);
      }
    }
  });
  traced.outputs({trace::f32("y", y, numel), trace::f32("mean", mean, chans),
                  trace::f32("invstd", invstd, chans),
                  trace::f32_or_none("running_mean", running_mean, chans),
                  trace::f32_or_none("running_var", running_var, chans)});
}

float batch_norm_value(float x, float mean, float invstd, float weight, float bias, bool relu) {
  const float v = ((x - mean) * invstd) * weight + bias;  // as normalize() computes each value
  return relu && v <= 0.0f ? 0.0f : v;
}

void batch_norm_eval(const BatchNormShape& s, const float* x, const float* weight,
                     const float* bias, const float* running_mean, const float* running_var,
                     float eps, float* y) {
  const std::int64_t numel = s.batch * s.channels * s.spatial, chans = s.channels;
  trace::Call traced(
      "batch_norm_eval",
      {trace::integer("batch", s.batch), trace::integer("channels", s.channels),
       trace::integer("spatial", s.spatial), trace::real("eps", eps)},
      {trace::f32("x", x, numel), trace::f32_or_none("weight", weight, chans),
       trace::f32_or_none("bias", bias, chans), trace::f32("running_mean", running_mean, chans),
       trace::f32("running_var", running_var, chans)});
  parallel_for(s.channels, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t c = begin; c < end; ++c) {
      const float m = running_mean[c];
      const float inv = 1.0f / std::sqrt(running_var[c] + eps);
      const float w = weight != nullptr ? weight[c] : 1.0f;
      const float b = bias != nullptr ? bias[c] : 0.0f;
      for (std::int64_t bi = 0; bi < s.batch; ++bi) {
        const float* in = x + (bi * s.channels + c) * s.spatial;
        float* out = y + (bi * s.channels + c) * s.spatial;
        for (std::int64_t p = 0; p < s.spatial; ++p) out[p] = ((in[p] - m) * inv) * w + b;
      }
    }
  });
  traced.outputs({trace::f32("y", y, numel)});
}

void batch_norm_backward(const BatchNormShape& s, const float* x, const float* weight,
                         const float* mean, const float* invstd, const float* dy, float* dx,
                         float* dweight, float* dbias, const float* relu_y) {
  const std::int64_t numel = s.batch * s.channels * s.spatial, chans = s.channels;
  trace::Call traced("batch_norm_backward",
                     {trace::integer("batch", s.batch), trace::integer("channels", s.channels),
                      trace::integer("spatial", s.spatial)},
                     {trace::f32("x", x, numel), trace::f32_or_none("weight", weight, chans),
                      trace::f32("mean", mean, chans), trace::f32("invstd", invstd, chans),
                      trace::f32("dy", dy, numel), trace::f32_or_none("relu_y", relu_y, numel)});
  const std::int64_t groups = (s.channels + kGroup - 1) / kGroup;
  parallel_for(groups, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t group = begin; group < end; ++group) {
      const std::int64_t c0 = group * kGroup, g = std::min(kGroup, s.channels - c0);
      float m[kGroup] = {}, inv[kGroup] = {}, w[kGroup] = {};
      for (std::int64_t u = 0; u < g; ++u) {
        m[u] = mean[c0 + u];
        inv[u] = invstd[c0 + u];
        w[u] = weight != nullptr ? weight[c0 + u] : 1.0f;
      }
      float sums[4][kGroup] = {};
      gradient_sums(s, x, dy, relu_y, c0, g, m, inv, w, sums);
      for (std::int64_t u = 0; u < g; ++u) {
        const std::int64_t c = c0 + u;
        if (dbias != nullptr) dbias[c] = sums[0][u];
        if (dweight != nullptr) dweight[c] = sums[1][u];
        if (dx != nullptr)
          input_gradient(s, x, dy, relu_y, c, m[u], inv[u], w[u], sums[2][u], sums[3][u], dx);
      }
    }
  });
  traced.outputs({trace::f32_or_none("dx", dx, numel),
                  trace::f32_or_none("dweight", dweight, chans),
                  trace::f32_or_none("dbias", dbias, chans)});
}

void layer_norm(std::int64_t rows, std::int64_t width, const float* x, const float* weight,
                const float* bias, float eps, float* y, float* mean, float* rstd) {
  trace::Call traced(
      "layer_norm",
      {trace::integer("rows", rows), trace::integer("width", width), trace::real("eps", eps)},
      {trace::f32("x", x, rows * width), trace::f32_or_none("weight", weight, width),
       trace::f32_or_none("bias", bias, width)});
  parallel_for(rows, 8, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* in = x + r * width;
      float m = 0.0f, var = 0.0f;
      moments(in, width, m, var);
      const float inv = 1.0f / std::sqrt(var + eps);
      mean[r] = m;
      rstd[r] = inv;
      float* out = y + r * width;
      for (std::int64_t j = 0; j < width; ++j) {
        const float w = weight != nullptr ? weight[j] : 1.0f;
        const float b = bias != nullptr ? bias[j] : 0.0f;
        out[j] = ((in[j] - m) * inv) * w + b;
      }
    }
  });
  traced.outputs({trace::f32("y", y, rows * width), trace::f32("mean", mean, rows),
                  trace::f32("rstd", rstd, rows)});
}

void layer_norm_backward(std::int64_t rows, std::int64_t width, const float* x, const float* weight,
                         const float* mean, const float* rstd, const float* dy, float* dx,
                         float* dweight, float* dbias) {
  trace::Call traced("layer_norm_backward",
                     {trace::integer("rows", rows), trace::integer("width", width)},
                     {trace::f32("x", x, rows * width), trace::f32_or_none("weight", weight, width),
                      trace::f32("mean", mean, rows), trace::f32("rstd", rstd, rows),
                      trace::f32("dy", dy, rows * width)});
  const float count = static_cast<float>(width);
  if (dx != nullptr) {
    parallel_for(rows, 8, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        const float* in = x + r * width;
        const float* g = dy + r * width;
        const float m = mean[r], inv = rstd[r];
        float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
        for (std::int64_t j = 0; j < width; ++j) {
          const float xhat = (in[j] - m) * inv;
          const float dxhat = g[j] * (weight != nullptr ? weight[j] : 1.0f);
          sum_dxhat = sum_dxhat + dxhat;
          sum_dxhat_xhat = sum_dxhat_xhat + dxhat * xhat;
        }
        const float k = inv / count;
        float* out = dx + r * width;
        for (std::int64_t j = 0; j < width; ++j) {
          const float xhat = (in[j] - m) * inv;
          const float dxhat = g[j] * (weight != nullptr ? weight[j] : 1.0f);
          out[j] = k * ((count * dxhat - sum_dxhat) - xhat * sum_dxhat_xhat);
        }
      }
    });
  }
  if (dweight == nullptr && dbias == nullptr) return;
  // Each column's two chains run over the rows in order; the loops see unaliased buffers, so that
  // GCC vectorises them across columns.
  parallel_for_columns(rows, width, [&](std::int64_t begin, std::int64_t end) {
    if (dweight != nullptr) {
      float* __restrict dw = dweight;
      for (std::int64_t j = begin; j < end; ++j) dw[j] = 0.0f;
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* __restrict in = x + r * width;
        const float* __restrict g = dy + r * width;
        const float m = mean[r], s = rstd[r];
        for (std::int64_t j = begin; j < end; ++j) dw[j] = dw[j] + g[j] * ((in[j] - m) * s);
      }
    }
    if (dbias != nullptr) {
      float* __restrict db = dbias;
      for (std::int64_t j = begin; j < end; ++j) db[j] = 0.0f;
      for (std::int64_t r = 0; r < rows; ++r) {
        const float* __restrict g = dy + r * width;
        for (std::int64_t j = begin; j < end; ++j) db[j] = db[j] + g[j];
      }
    }
  });
  traced.outputs({trace::f32_or_none("dx", dx, rows * width),
                  trace::f32_or_none("dweight", dweight, width),
                  trace::f32_or_none("dbias", dbias, width)});
}

void group_norm(std::int64_t batch, std::int64_t channels, std::int64_t spatial,
                std::int64_t groups, const float* x, const float* weight, const float* bias,
                float eps, float* y, float* mean, float* rstd) {
  const std::int64_t numel = batch * channels * spatial, rows = batch * groups;
  trace::Call traced("group_norm",
                     {trace::integer("batch", batch), trace::integer("channels", channels),
                      trace::integer("spatial", spatial), trace::integer("groups", groups),
                      trace::real("eps", eps)},
                     {trace::f32("x", x, numel), trace::f32_or_none("weight", weight, channels),
                      trace::f32_or_none("bias", bias, channels)});
  const std::int64_t per = channels / groups, width = per * spatial;
  parallel_for(batch * groups, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* in = x + r * width;
      float m = 0.0f, var = 0.0f;
      moments(in, width, m, var);
      const float inv = 1.0f / std::sqrt(var + eps);
      mean[r] = m;
      rstd[r] = inv;
      float* out = y + r * width;
      const std::int64_t c0 = (r % groups) * per;
      for (std::int64_t j = 0; j < width; ++j) {
        const std::int64_t c = c0 + j / spatial;
        const float w = weight != nullptr ? weight[c] : 1.0f;
        const float b = bias != nullptr ? bias[c] : 0.0f;
        out[j] = ((in[j] - m) * inv) * w + b;
      }
    }
  });
  traced.outputs(
      {trace::f32("y", y, numel), trace::f32("mean", mean, rows), trace::f32("rstd", rstd, rows)});
}

void group_norm_backward(std::int64_t batch, std::int64_t channels, std::int64_t spatial,
                         std::int64_t groups, const float* x, const float* weight,
                         const float* mean, const float* rstd, const float* dy, float* dx,
                         float* dweight, float* dbias) {
  const std::int64_t numel = batch * channels * spatial, rows = batch * groups;
  trace::Call traced("group_norm_backward",
                     {trace::integer("batch", batch), trace::integer("channels", channels),
                      trace::integer("spatial", spatial), trace::integer("groups", groups)},
                     {trace::f32("x", x, numel), trace::f32_or_none("weight", weight, channels),
                      trace::f32("mean", mean, rows), trace::f32("rstd", rstd, rows),
                      trace::f32("dy", dy, numel)});
  const std::int64_t per = channels / groups, width = per * spatial;
  const float count = static_cast<float>(width);
  auto w_of = [&](std::int64_t c) { return weight != nullptr ? weight[c] : 1.0f; };
  if (dx != nullptr) {
    parallel_for(batch * groups, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t r = begin; r < end; ++r) {
        const float* in = x + r * width;
        const float* g = dy + r * width;
        const float m = mean[r], inv = rstd[r];
        const std::int64_t c0 = (r % groups) * per;
        float sum_dxhat = 0.0f, sum_dxhat_xhat = 0.0f;
        for (std::int64_t j = 0; j < width; ++j) {
          const float xhat = (in[j] - m) * inv;
          const float dxhat = g[j] * w_of(c0 + j / spatial);
          sum_dxhat = sum_dxhat + dxhat;
          sum_dxhat_xhat = sum_dxhat_xhat + dxhat * xhat;
        }
        const float k = inv / count;
        float* out = dx + r * width;
        for (std::int64_t j = 0; j < width; ++j) {
          const float xhat = (in[j] - m) * inv;
          const float dxhat = g[j] * w_of(c0 + j / spatial);
          out[j] = k * ((count * dxhat - sum_dxhat) - xhat * sum_dxhat_xhat);
        }
      }
    });
  }
  if (dweight != nullptr || dbias != nullptr) {
    parallel_for(channels, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t c = begin; c < end; ++c) {
        float dw = 0.0f, db = 0.0f;
        const std::int64_t g = c / per;
        for (std::int64_t b = 0; b < batch; ++b) {
          const std::int64_t r = b * groups + g;
          const float* in = x + (b * channels + c) * spatial;
          const float* d = dy + (b * channels + c) * spatial;
          for (std::int64_t p = 0; p < spatial; ++p) {
            dw = dw + d[p] * ((in[p] - mean[r]) * rstd[r]);
            db = db + d[p];
          }
        }
        if (dweight != nullptr) dweight[c] = dw;
        if (dbias != nullptr) dbias[c] = db;
      }
    });
  }
  traced.outputs({trace::f32_or_none("dx", dx, numel),
                  trace::f32_or_none("dweight", dweight, channels),
                  trace::f32_or_none("dbias", dbias, channels)});
}

}  // namespace vt::kernels
