#include "kernels/softmax.h"

#include "kernels/parallel.h"
#include "kernels/scalar.h"
#include "kernels/trace.h"
#include "kernels/wide.h"

namespace vt::kernels {
namespace {

std::int64_t valid_columns(std::int64_t row, std::int64_t width, bool causal) {
  return causal ? row % width + 1 : width;
}

// The largest of n values (the first one where a later one is not larger); NaNs reach the
// result through exp's NaN either way.
float row_maximum(const float* x, std::int64_t n) {
  float m = x[0];
  for (std::int64_t j = 1; j < n; ++j) {
    if (x[j] > m) m = x[j];
  }
  return m;
}

// v[j] = e^(v[j] − m), every lane alone: vectorised (scalar.h's exp has no branches).
VT_WIDE void exp_shifted(float* __restrict v, std::int64_t n, float m) {
  for (std::int64_t j = 0; j < n; ++j) v[j] = vt_exp(v[j] - m);
}

}  // namespace

void softmax(std::int64_t rows, std::int64_t width, const float* x, float divisor, bool causal,
             float* y) {
  trace::Call traced("softmax",
                     {trace::integer("rows", rows), trace::integer("width", width),
                      trace::real("divisor", divisor), trace::integer("causal", causal)},
                     {trace::f32("x", x, rows * width)});
  parallel_for(rows, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* in = x + r * width;
      float* out = y + r * width;
      const std::int64_t n = valid_columns(r, width, causal);
      for (std::int64_t j = 0; j < n; ++j) out[j] = in[j] / divisor;
      const float m = row_maximum(out, n);
      exp_shifted(out, n, m);
      float sum = 0.0f;
      for (std::int64_t j = 0; j < n; ++j) sum = sum + out[j];
      for (std::int64_t j = 0; j < n; ++j) out[j] = out[j] / sum;
      for (std::int64_t j = n; j < width; ++j) out[j] = 0.0f;
    }
  });
  traced.outputs({trace::f32("y", y, rows * width)});
}

void softmax_backward(std::int64_t rows, std::int64_t width, const float* y, const float* dy,
                      float divisor, bool causal, float* dx) {
  trace::Call traced("softmax_backward",
                     {trace::integer("rows", rows), trace::integer("width", width),
                      trace::real("divisor", divisor), trace::integer("causal", causal)},
                     {trace::f32("y", y, rows * width), trace::f32("dy", dy, rows * width)});
  parallel_for(rows, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* p = y + r * width;
      const float* g = dy + r * width;
      float* out = dx + r * width;
      const std::int64_t n = valid_columns(r, width, causal);
      float dot = 0.0f;
      for (std::int64_t j = 0; j < n; ++j) dot = dot + g[j] * p[j];
      for (std::int64_t j = 0; j < n; ++j) out[j] = (p[j] * (g[j] - dot)) / divisor;
      for (std::int64_t j = n; j < width; ++j) out[j] = 0.0f;
    }
  });
  traced.outputs({trace::f32("dx", dx, rows * width)});
}

void log_softmax(std::int64_t rows, std::int64_t width, const float* x, float* y) {
  trace::Call traced("log_softmax", {trace::integer("rows", rows), trace::integer("width", width)},
                     {trace::f32("x", x, rows * width)});
  parallel_for(rows, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* in = x + r * width;
      float* out = y + r * width;
      const float m = row_maximum(in, width);
      float sum = 0.0f;
      for (std::int64_t j = 0; j < width; ++j) sum = sum + vt_exp(in[j] - m);
      const float lse = m + vt_log(sum);
      for (std::int64_t j = 0; j < width; ++j) out[j] = in[j] - lse;
    }
  });
  traced.outputs({trace::f32("y", y, rows * width)});
}

void log_softmax_backward(std::int64_t rows, std::int64_t width, const float* y, const float* dy,
                          float* dx) {
  trace::Call traced("log_softmax_backward",
                     {trace::integer("rows", rows), trace::integer("width", width)},
                     {trace::f32("y", y, rows * width), trace::f32("dy", dy, rows * width)});
  parallel_for(rows, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* out = y + r * width;
      const float* g = dy + r * width;
      float* d = dx + r * width;
      float sum = 0.0f;
      for (std::int64_t j = 0; j < width; ++j) sum = sum + g[j];
      for (std::int64_t j = 0; j < width; ++j) d[j] = g[j] - vt_exp(out[j]) * sum;
    }
  });
  traced.outputs({trace::f32("dx", dx, rows * width)});
}

float cross_entropy(std::int64_t rows, std::int64_t classes, const float* logits,
                    const std::int64_t* targets, float* row_max, float* row_sum) {
  trace::Call traced(
      "cross_entropy", {trace::integer("rows", rows), trace::integer("classes", classes)},
      {trace::f32("logits", logits, rows * classes), trace::i64("targets", targets, rows)});
  // Each row's loss first (threads split rows), then their mean as one chain in row order.
  parallel_for(rows, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* in = logits + r * classes;
      const float m = row_maximum(in, classes);
      float sum = 0.0f;
      for (std::int64_t j = 0; j < classes; ++j) sum = sum + vt_exp(in[j] - m);
      row_max[r] = m;
      row_sum[r] = sum;
    }
  });
  float total = 0.0f;
  for (std::int64_t r = 0; r < rows; ++r) {
    const float lse = row_max[r] + vt_log(row_sum[r]);
    total = total + (lse - logits[r * classes + targets[r]]);
  }
  const float loss = total / static_cast<float>(rows);
  traced.outputs({trace::f32("loss", &loss, 1), trace::f32("row_max", row_max, rows),
                  trace::f32("row_sum", row_sum, rows)});
  return loss;
}

void cross_entropy_backward(std::int64_t rows, std::int64_t classes, const float* logits,
                            const std::int64_t* targets, const float* row_max, const float* row_sum,
                            float dloss, float* dlogits) {
  trace::Call traced(
      "cross_entropy_backward",
      {trace::integer("rows", rows), trace::integer("classes", classes),
       trace::real("dloss", dloss)},
      {trace::f32("logits", logits, rows * classes), trace::i64("targets", targets, rows),
       trace::f32("row_max", row_max, rows), trace::f32("row_sum", row_sum, rows)});
  const float scale = dloss / static_cast<float>(rows);
  parallel_for(rows, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* in = logits + r * classes;
      float* out = dlogits + r * classes;
      for (std::int64_t j = 0; j < classes; ++j) {
        const float p = vt_exp(in[j] - row_max[r]) / row_sum[r];
        out[j] = (j == targets[r] ? p - 1.0f : p) * scale;
      }
    }
  });
  traced.outputs({trace::f32("dlogits", dlogits, rows * classes)});
}

}  // namespace vt::kernels
