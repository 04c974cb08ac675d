#include "kernels/norm.h"

#include <algorithm>
#include <cmath>

#include "kernels/parallel.h"

namespace vt::kernels {
namespace {

// Mean and variance of the `segments` runs of `length` values at x, x + stride, ...: two chains
// in that order, the second over the squared deviations from the first's mean.
void moments(const float* x, std::int64_t segments, std::int64_t length, std::int64_t stride,
             float& mean, float& var) {
  const float count = static_cast<float>(segments * length);
  float sum = 0.0f;
  for (std::int64_t g = 0; g < segments; ++g) {
    for (std::int64_t i = 0; i < length; ++i) sum = sum + x[g * stride + i];
  }
  mean = sum / count;
  float squares = 0.0f;
  for (std::int64_t g = 0; g < segments; ++g) {
    for (std::int64_t i = 0; i < length; ++i) {
      const float d = x[g * stride + i] - mean;
      squares = squares + d * d;
    }
  }
  var = squares / count;
}

}  // namespace

// Batch norm's chains run over (b, s) within one channel; the channels of a group of kGroup
// advance side by side, so that independent chains fill the adder's pipeline while each keeps
// its own order.
constexpr std::int64_t kGroup = 8;

void batch_norm_train(const BatchNormShape& s, const float* x, const float* weight,
                      const float* bias, float eps, float momentum, float* running_mean,
                      float* running_var, float* y, float* mean, float* invstd) {
  const float count = static_cast<float>(s.batch * s.spatial);
  const float keep = 1.0f - momentum;
  const float unbias = count / (count - 1.0f);
  const std::int64_t groups = (s.channels + kGroup - 1) / kGroup;
  parallel_for(groups, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t group = begin; group < end; ++group) {
      const std::int64_t c0 = group * kGroup, g = std::min(kGroup, s.channels - c0);
      float sum[kGroup] = {}, squares[kGroup] = {}, m[kGroup] = {};
      for (std::int64_t b = 0; b < s.batch; ++b) {
        const float* in = x + (b * s.channels + c0) * s.spatial;
        for (std::int64_t p = 0; p < s.spatial; ++p) {
          for (std::int64_t u = 0; u < g; ++u) sum[u] = sum[u] + in[u * s.spatial + p];
        }
      }
      for (std::int64_t u = 0; u < g; ++u) m[u] = sum[u] / count;
      for (std::int64_t b = 0; b < s.batch; ++b) {
        const float* in = x + (b * s.channels + c0) * s.spatial;
        for (std::int64_t p = 0; p < s.spatial; ++p) {
          for (std::int64_t u = 0; u < g; ++u) {
            const float d = in[u * s.spatial + p] - m[u];
            squares[u] = squares[u] + d * d;
          }
        }
      }
      for (std::int64_t u = 0; u < g; ++u) {
        const std::int64_t c = c0 + u;
        const float var = squares[u] / count;
        const float inv = 1.0f / std::sqrt(var + eps);
        mean[c] = m[u];
        invstd[c] = inv;
        const float w = weight != nullptr ? weight[c] : 1.0f;
        const float bb = bias != nullptr ? bias[c] : 0.0f;
        for (std::int64_t b = 0; b < s.batch; ++b) {
          const float* in = x + (b * s.channels + c) * s.spatial;
          float* out = y + (b * s.channels + c) * s.spatial;
          for (std::int64_t p = 0; p < s.spatial; ++p) out[p] = ((in[p] - m[u]) * inv) * w + bb;
        }
        if (running_mean != nullptr) running_mean[c] = keep * running_mean[c] + momentum * m[u];
        if (running_var != nullptr)
          running_var[c] = keep * running_var[c] + momentum * (var * unbias);
      }
    }
  });
}

void batch_norm_eval(const BatchNormShape& s, const float* x, const float* weight,
                     const float* bias, const float* running_mean, const float* running_var,
                     float eps, float* y) {
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
}

void batch_norm_backward(const BatchNormShape& s, const float* x, const float* weight,
                         const float* mean, const float* invstd, const float* dy, float* dx,
                         float* dweight, float* dbias) {
  const float count = static_cast<float>(s.batch * s.spatial);
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
      // Chains over (b, s): Σ dy, Σ dy·x̂, Σ dx̂ and Σ dx̂·x̂ with dx̂ = dy·w.
      float sum_dy[kGroup] = {}, sum_dy_xhat[kGroup] = {}, sum_dxhat[kGroup] = {},
            sum_dxhat_xhat[kGroup] = {};
      for (std::int64_t b = 0; b < s.batch; ++b) {
        const float* in = x + (b * s.channels + c0) * s.spatial;
        const float* gr = dy + (b * s.channels + c0) * s.spatial;
        for (std::int64_t p = 0; p < s.spatial; ++p) {
          for (std::int64_t u = 0; u < g; ++u) {
            const float gv = gr[u * s.spatial + p];
            const float xhat = (in[u * s.spatial + p] - m[u]) * inv[u];
            const float dxhat = gv * w[u];
            sum_dy[u] = sum_dy[u] + gv;
            sum_dy_xhat[u] = sum_dy_xhat[u] + gv * xhat;
            sum_dxhat[u] = sum_dxhat[u] + dxhat;
            sum_dxhat_xhat[u] = sum_dxhat_xhat[u] + dxhat * xhat;
          }
        }
      }
      for (std::int64_t u = 0; u < g; ++u) {
        const std::int64_t c = c0 + u;
        if (dbias != nullptr) dbias[c] = sum_dy[u];
        if (dweight != nullptr) dweight[c] = sum_dy_xhat[u];
        if (dx == nullptr) continue;
        const float k = inv[u] / count;
        for (std::int64_t b = 0; b < s.batch; ++b) {
          const float* in = x + (b * s.channels + c) * s.spatial;
          const float* gr = dy + (b * s.channels + c) * s.spatial;
          float* out = dx + (b * s.channels + c) * s.spatial;
          for (std::int64_t p = 0; p < s.spatial; ++p) {
            const float xhat = (in[p] - m[u]) * inv[u];
            out[p] = k * ((count * (gr[p] * w[u]) - sum_dxhat[u]) - xhat * sum_dxhat_xhat[u]);
          }
        }
      }
    }
  });
}

void layer_norm(std::int64_t rows, std::int64_t width, const float* x, const float* weight,
                const float* bias, float eps, float* y, float* mean, float* rstd) {
  parallel_for(rows, 8, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* in = x + r * width;
      float m = 0.0f, var = 0.0f;
      moments(in, 1, width, width, m, var);
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
}

void layer_norm_backward(std::int64_t rows, std::int64_t width, const float* x, const float* weight,
                         const float* mean, const float* rstd, const float* dy, float* dx,
                         float* dweight, float* dbias) {
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
  parallel_for(width, 64, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t j = begin; j < end; ++j) {
      if (dweight != nullptr) dweight[j] = 0.0f;
      if (dbias != nullptr) dbias[j] = 0.0f;
    }
    for (std::int64_t r = 0; r < rows; ++r) {
      const float* in = x + r * width;
      const float* g = dy + r * width;
      for (std::int64_t j = begin; j < end; ++j) {
        if (dweight != nullptr) dweight[j] = dweight[j] + g[j] * ((in[j] - mean[r]) * rstd[r]);
        if (dbias != nullptr) dbias[j] = dbias[j] + g[j];
      }
    }
  });
}

}  // namespace vt::kernels
