#include "kernels/pointwise.h"

#include <algorithm>
#include <array>
#include <cmath>

#include "kernels/parallel.h"
#include "kernels/scalar.h"
#include "kernels/trace.h"
#include "kernels/wide.h"

namespace vt::kernels {
namespace {

constexpr std::int64_t kGrain = 16384;  // elements per thread at least: below it, one thread

// body(begin, end) over chunks of [0, n). Bodies copy their pointers into local __restrict
// ones, so that the compiler sees no aliasing and vectorizes (lanes hold separate elements, so
// that changes nothing but speed) and selects without branches.
template <typename Body>
void chunks(std::int64_t n, const Body& body) {
  parallel_for(n, kGrain, body);
}

float dropout_scale(float p) { return 1.0f / (1.0f - p); }

// The table rows an embedding reads: 0 up to the largest id (a trace records no more of the
// table than decides the output).
std::int64_t embedding_rows(std::int64_t count, const std::int64_t* ids) {
  std::int64_t rows = 0;
  for (std::int64_t i = 0; i < count; ++i) rows = std::max(rows, ids[i] + 1);
  return rows;
}

bool kept(std::uint64_t state, std::uint64_t call, std::int64_t i, float p) {
  return uniform_of(stream_at(state, (call << 40) + static_cast<std::uint64_t>(i))) >= p;
}

// cos(t·π/2) for t in [0, 1]: the Taylor series to a^14 (its remainder below 7e-11 at a = π/2,
// far under binary32's rounding) by Horner's rule, each coefficient 1/k! rounded to binary32.
float quarter_cosine(float t) {
  constexpr float kHalfPi = 1.57079637f;
  const float a = t * kHalfPi;
  const float s = a * a;
  float p = static_cast<float>(-1.0 / 87178291200.0);  // -1/14!
  p = p * s + static_cast<float>(1.0 / 479001600.0);
  p = p * s + static_cast<float>(-1.0 / 3628800.0);
  p = p * s + static_cast<float>(1.0 / 40320.0);
  p = p * s + static_cast<float>(-1.0 / 720.0);
  p = p * s + static_cast<float>(1.0 / 24.0);
  p = p * s + -0.5f;
  return p * s + 1.0f;
}

// cos(2πu) for u = k·2^-24 in [0, 1): v = 4u and its quarter q and fraction f are exact, and
// each quarter is the first one's cosine read forwards or backwards, with its sign.
float turn_cosine(float u) {
  const float v = u * 4.0f;
  const int quarter = static_cast<int>(v);
  const float f = v - static_cast<float>(quarter);
  const float c = quarter_cosine((quarter & 1) != 0 ? 1.0f - f : f);
  return quarter == 1 || quarter == 2 ? -c : c;
}

}  // namespace

void add_bias(std::int64_t rows, std::int64_t cols, float* y, const float* bias) {
  trace::Call traced("add_bias", {trace::integer("rows", rows), trace::integer("cols", cols)},
                     {trace::f32("y", y, rows * cols), trace::f32("bias", bias, cols)});
  parallel_for(rows, kGrain / (cols > 0 ? cols : 1) + 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      float* row = y + r * cols;
      for (std::int64_t c = 0; c < cols; ++c) row[c] = row[c] + bias[c];
    }
  });
  traced.outputs({trace::f32("y", y, rows * cols)});
}

namespace {
VT_WIDE void relu_range(std::int64_t begin, std::int64_t end, const float* __restrict in,
                        float* __restrict out) {
  for (std::int64_t i = begin; i < end; ++i) out[i] = in[i] <= 0.0f ? 0.0f : in[i];
}
VT_WIDE void relu_backward_range(std::int64_t begin, std::int64_t end, const float* __restrict out,
                                 const float* __restrict g, float* __restrict d) {
  for (std::int64_t i = begin; i < end; ++i) {
    const float grad = g[i];  // loaded unconditionally: the select needs no branch
    d[i] = out[i] <= 0.0f ? 0.0f : grad;
  }
}
}  // namespace

void relu(std::int64_t n, const float* x, float* y) {
  trace::Call traced("relu", {trace::integer("n", n)}, {trace::f32("x", x, n)});
  chunks(n, [=](std::int64_t begin, std::int64_t end) { relu_range(begin, end, x, y); });
  traced.outputs({trace::f32("y", y, n)});
}
void relu_backward(std::int64_t n, const float* y, const float* dy, float* dx) {
  trace::Call traced("relu_backward", {trace::integer("n", n)},
                     {trace::f32("y", y, n), trace::f32("dy", dy, n)});
  chunks(n,
         [=](std::int64_t begin, std::int64_t end) { relu_backward_range(begin, end, y, dy, dx); });
  traced.outputs({trace::f32("dx", dx, n)});
}

namespace {
VT_WIDE void gelu_range(std::int64_t begin, std::int64_t end, const float* __restrict x,
                        float* __restrict y) {
  for (std::int64_t i = begin; i < end; ++i) y[i] = vt_gelu(x[i]);
}
VT_WIDE void gelu_backward_range(std::int64_t begin, std::int64_t end, const float* __restrict x,
                                 const float* __restrict dy, float* __restrict dx) {
  for (std::int64_t i = begin; i < end; ++i) dx[i] = dy[i] * vt_gelu_grad(x[i]);
}
}  // namespace

void gelu(std::int64_t n, const float* x, float* y) {
  trace::Call traced("gelu", {trace::integer("n", n)}, {trace::f32("x", x, n)});
  chunks(n, [=](std::int64_t begin, std::int64_t end) { gelu_range(begin, end, x, y); });
  traced.outputs({trace::f32("y", y, n)});
}
void gelu_backward(std::int64_t n, const float* x, const float* dy, float* dx) {
  trace::Call traced("gelu_backward", {trace::integer("n", n)},
                     {trace::f32("x", x, n), trace::f32("dy", dy, n)});
  chunks(n,
         [=](std::int64_t begin, std::int64_t end) { gelu_backward_range(begin, end, x, dy, dx); });
  traced.outputs({trace::f32("dx", dx, n)});
}

void dropout(std::int64_t n, const float* x, float p, std::uint64_t state, std::uint64_t call,
             float* y) {
  trace::Call traced("dropout",
                     {trace::integer("n", n), trace::real("p", p),
                      trace::integer("state", static_cast<std::int64_t>(state)),
                      trace::integer("call", static_cast<std::int64_t>(call))},
                     {trace::f32("x", x, n)});
  const float scale = dropout_scale(p);
  chunks(n, [=](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) y[i] = kept(state, call, i, p) ? x[i] * scale : 0.0f;
  });
  traced.outputs({trace::f32("y", y, n)});
}
void dropout_backward(std::int64_t n, const float* dy, float p, std::uint64_t state,
                      std::uint64_t call, float* dx) {
  trace::Call traced("dropout_backward",
                     {trace::integer("n", n), trace::real("p", p),
                      trace::integer("state", static_cast<std::int64_t>(state)),
                      trace::integer("call", static_cast<std::int64_t>(call))},
                     {trace::f32("dy", dy, n)});
  const float scale = dropout_scale(p);
  chunks(n, [=](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      dx[i] = kept(state, call, i, p) ? dy[i] * scale : 0.0f;
  });
  traced.outputs({trace::f32("dx", dx, n)});
}

namespace {
void feature_dropout_untraced(std::int64_t batch, std::int64_t channels, std::int64_t spatial,
                              const float* x, float p, std::uint64_t state, std::uint64_t call,
                              float* y) {
  const float scale = dropout_scale(p);
  parallel_for(batch * channels, 1, [=](std::int64_t begin, std::int64_t end) {
    for (std::int64_t bc = begin; bc < end; ++bc) {
      const bool keep = kept(state, call, bc, p);
      for (std::int64_t i = bc * spatial; i < (bc + 1) * spatial; ++i)
        y[i] = keep ? x[i] * scale : 0.0f;
    }
  });
}
std::array<trace::Param, 6> feature_dropout_params(std::int64_t batch, std::int64_t channels,
                                                   std::int64_t spatial, float p,
                                                   std::uint64_t state, std::uint64_t call) {
  return {trace::integer("batch", batch),
          trace::integer("channels", channels),
          trace::integer("spatial", spatial),
          trace::real("p", p),
          trace::integer("state", static_cast<std::int64_t>(state)),
          trace::integer("call", static_cast<std::int64_t>(call))};
}
}  // namespace

void feature_dropout(std::int64_t batch, std::int64_t channels, std::int64_t spatial,
                     const float* x, float p, std::uint64_t state, std::uint64_t call, float* y) {
  const std::int64_t n = batch * channels * spatial;
  const auto params = feature_dropout_params(batch, channels, spatial, p, state, call);
  trace::Call traced("feature_dropout", params, std::array{trace::f32("x", x, n)});
  feature_dropout_untraced(batch, channels, spatial, x, p, state, call, y);
  traced.outputs({trace::f32("y", y, n)});
}
void feature_dropout_backward(std::int64_t batch, std::int64_t channels, std::int64_t spatial,
                              const float* dy, float p, std::uint64_t state, std::uint64_t call,
                              float* dx) {
  const std::int64_t n = batch * channels * spatial;
  const auto params = feature_dropout_params(batch, channels, spatial, p, state, call);
  trace::Call traced("feature_dropout_backward", params, std::array{trace::f32("dy", dy, n)});
  feature_dropout_untraced(batch, channels, spatial, dy, p, state, call, dx);
  traced.outputs({trace::f32("dx", dx, n)});
}

void uniform(std::int64_t n, std::uint64_t state, std::uint64_t call, float* y) {
  trace::Call traced(
      "uniform",
      {trace::integer("n", n), trace::integer("state", static_cast<std::int64_t>(state)),
       trace::integer("call", static_cast<std::int64_t>(call))},
      {});
  chunks(n, [=](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      y[i] = uniform_of(stream_at(state, (call << 40) + static_cast<std::uint64_t>(i)));
  });
  traced.outputs({trace::f32("y", y, n)});
}

void normal(std::int64_t n, std::uint64_t state, std::uint64_t call, float* y) {
  trace::Call traced(
      "normal",
      {trace::integer("n", n), trace::integer("state", static_cast<std::int64_t>(state)),
       trace::integer("call", static_cast<std::int64_t>(call))},
      {});
  chunks(n, [=](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::uint64_t first = (call << 40) + 2 * static_cast<std::uint64_t>(i);
      // 1 - u is in (0, 1]: its log is finite, 0 at most.
      const float radius_draw = 1.0f - uniform_of(stream_at(state, first));
      const float radius = std::sqrt(-2.0f * vt_log(radius_draw));
      y[i] = radius * turn_cosine(uniform_of(stream_at(state, first + 1)));
    }
  });
  traced.outputs({trace::f32("y", y, n)});
}

void bernoulli(std::int64_t n, float p, std::uint64_t state, std::uint64_t call, float* y) {
  trace::Call traced("bernoulli",
                     {trace::integer("n", n), trace::real("p", p),
                      trace::integer("state", static_cast<std::int64_t>(state)),
                      trace::integer("call", static_cast<std::int64_t>(call))},
                     {});
  chunks(n, [=](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      y[i] = uniform_of(stream_at(state, (call << 40) + static_cast<std::uint64_t>(i))) < p ? 1.0f
                                                                                            : 0.0f;
  });
  traced.outputs({trace::f32("y", y, n)});
}

void randint(std::int64_t n, std::int64_t low, std::int64_t high, std::uint64_t state,
             std::uint64_t call, std::int64_t* y) {
  trace::Call traced(
      "randint",
      {trace::integer("n", n), trace::integer("low", low), trace::integer("high", high),
       trace::integer("state", static_cast<std::int64_t>(state)),
       trace::integer("call", static_cast<std::int64_t>(call))},
      {});
  // Unsigned: high − low may pass INT64_MAX, and the sum wraps back into [low, high).
  const std::uint64_t range = static_cast<std::uint64_t>(high) - static_cast<std::uint64_t>(low);
  chunks(n, [=](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      const std::uint64_t draw = stream_at(state, (call << 40) + static_cast<std::uint64_t>(i));
      const auto scaled =
          static_cast<std::uint64_t>((static_cast<unsigned __int128>(draw) * range) >> 64);
      y[i] = static_cast<std::int64_t>(static_cast<std::uint64_t>(low) + scaled);
    }
  });
  traced.outputs({trace::i64("y", y, n)});
}

void bernoulli_of(std::int64_t n, const float* p, std::uint64_t state, std::uint64_t call,
                  float* y) {
  trace::Call traced(
      "bernoulli_of",
      {trace::integer("n", n), trace::integer("state", static_cast<std::int64_t>(state)),
       trace::integer("call", static_cast<std::int64_t>(call))},
      {trace::f32("p", p, n)});
  chunks(n, [=](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      y[i] = uniform_of(stream_at(state, (call << 40) + static_cast<std::uint64_t>(i))) < p[i]
                 ? 1.0f
                 : 0.0f;
  });
  traced.outputs({trace::f32("y", y, n)});
}

void row_mean(std::int64_t rows, std::int64_t width, const float* x, float* y) {
  trace::Call traced("row_mean", {trace::integer("rows", rows), trace::integer("width", width)},
                     {trace::f32("x", x, rows * width)});
  const float count = static_cast<float>(width);
  parallel_for(rows, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      float sum = 0.0f;
      for (std::int64_t j = 0; j < width; ++j) sum = sum + x[r * width + j];
      y[r] = sum / count;
    }
  });
  traced.outputs({trace::f32("y", y, rows)});
}
void row_mean_backward(std::int64_t rows, std::int64_t width, const float* dy, float* dx) {
  trace::Call traced("row_mean_backward",
                     {trace::integer("rows", rows), trace::integer("width", width)},
                     {trace::f32("dy", dy, rows)});
  const float count = static_cast<float>(width);
  parallel_for(rows, 16, [=](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float share = dy[r] / count;
      for (std::int64_t j = 0; j < width; ++j) dx[r * width + j] = share;
    }
  });
  traced.outputs({trace::f32("dx", dx, rows * width)});
}

float mse(std::int64_t n, const float* a, const float* b) {
  trace::Call traced("mse", {trace::integer("n", n)},
                     {trace::f32("a", a, n), trace::f32("b", b, n)});
  float sum = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float d = a[i] - b[i];
    sum = sum + d * d;
  }
  const float loss = sum / static_cast<float>(n);
  traced.outputs({trace::f32("loss", &loss, 1)});
  return loss;
}
void mse_backward(std::int64_t n, const float* a, const float* b, float dloss, float* da) {
  trace::Call traced("mse_backward", {trace::integer("n", n), trace::real("dloss", dloss)},
                     {trace::f32("a", a, n), trace::f32("b", b, n)});
  const float scale = (2.0f * dloss) / static_cast<float>(n);
  chunks(n, [=](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) da[i] = (a[i] - b[i]) * scale;
  });
  traced.outputs({trace::f32("da", da, n)});
}

void embedding(std::int64_t count, std::int64_t width, const std::int64_t* ids, const float* table,
               float* y) {
  trace::Call traced(
      "embedding", {trace::integer("count", count), trace::integer("width", width)},
      {trace::i64("ids", ids, count),
       trace::f32("table", table, trace::active() ? embedding_rows(count, ids) * width : 0)});
  parallel_for(count, 16, [=](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i)
      std::copy(table + ids[i] * width, table + (ids[i] + 1) * width, y + i * width);
  });
  traced.outputs({trace::f32("y", y, count * width)});
}

void embedding_backward(std::int64_t count, std::int64_t width, std::int64_t rows,
                        const std::int64_t* ids, const float* dy, float* dtable) {
  trace::Call traced("embedding_backward",
                     {trace::integer("count", count), trace::integer("width", width),
                      trace::integer("rows", rows)},
                     {trace::i64("ids", ids, count), trace::f32("dy", dy, count * width)});
  parallel_for(width, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = 0; r < rows; ++r) {
      for (std::int64_t j = begin; j < end; ++j) dtable[r * width + j] = 0.0f;
    }
    for (std::int64_t i = 0; i < count; ++i) {
      float* row = dtable + ids[i] * width;
      const float* g = dy + i * width;
      for (std::int64_t j = begin; j < end; ++j) row[j] = row[j] + g[j];
    }
  });
  traced.outputs({trace::f32("dtable", dtable, rows * width)});
}

}  // namespace vt::kernels
