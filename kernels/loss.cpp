#include "kernels/loss.h"

#include <algorithm>
#include <vector>

#include "kernels/parallel.h"
#include "kernels/scalar.h"
#include "kernels/trace.h"

namespace vt::kernels {
namespace {

float row_maximum(const float* x, std::int64_t n) {
  float m = x[0];
  for (std::int64_t j = 1; j < n; ++j) {
    if (x[j] > m) m = x[j];
  }
  return m;
}

}  // namespace

float nll_loss(std::int64_t rows, std::int64_t classes, const float* logp,
               const std::int64_t* targets, std::int64_t ignore_index) {
  trace::Call traced(
      "nll_loss",
      {trace::integer("rows", rows), trace::integer("classes", classes),
       trace::integer("ignore_index", ignore_index)},
      {trace::f32("logp", logp, rows * classes), trace::i64("targets", targets, rows)});
  float sum = 0.0f;
  std::int64_t kept = 0;
  for (std::int64_t r = 0; r < rows; ++r) {
    if (targets[r] == ignore_index) continue;
    sum = sum + -logp[r * classes + targets[r]];
    ++kept;
  }
  const float loss = sum / static_cast<float>(kept);
  traced.outputs({trace::f32("loss", &loss, 1)});
  return loss;
}

void nll_loss_backward(std::int64_t rows, std::int64_t classes, const std::int64_t* targets,
                       std::int64_t ignore_index, float g, float* dlogp) {
  trace::Call traced("nll_loss_backward",
                     {trace::integer("rows", rows), trace::integer("classes", classes),
                      trace::integer("ignore_index", ignore_index), trace::real("dloss", g)},
                     {trace::i64("targets", targets, rows)});
  std::int64_t kept = 0;
  for (std::int64_t r = 0; r < rows; ++r) kept += targets[r] != ignore_index;
  const float share = -(g / static_cast<float>(kept));
  std::fill(dlogp, dlogp + rows * classes, 0.0f);
  for (std::int64_t r = 0; r < rows; ++r) {
    if (targets[r] != ignore_index) dlogp[r * classes + targets[r]] = share;
  }
  traced.outputs({trace::f32("dlogp", dlogp, rows * classes)});
}

float cross_entropy_smoothed(std::int64_t rows, std::int64_t classes, const float* logits,
                             const std::int64_t* targets, float eps, float* row_max,
                             float* row_sum) {
  trace::Call traced(
      "cross_entropy_smoothed",
      {trace::integer("rows", rows), trace::integer("classes", classes), trace::real("eps", eps)},
      {trace::f32("logits", logits, rows * classes), trace::i64("targets", targets, rows)});
  const float keep = 1.0f - eps, spread = eps / static_cast<float>(classes);
  std::vector<float> row_loss(static_cast<std::size_t>(rows));
  parallel_for(rows, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* in = logits + r * classes;
      const float m = row_maximum(in, classes);
      float sum = 0.0f;
      for (std::int64_t j = 0; j < classes; ++j) sum = sum + vt_exp(in[j] - m);
      const float lse = m + vt_log(sum);
      float all = 0.0f;
      for (std::int64_t j = 0; j < classes; ++j) all = all + (in[j] - lse);
      row_max[r] = m;
      row_sum[r] = sum;
      row_loss[static_cast<std::size_t>(r)] = keep * -(in[targets[r]] - lse) + spread * -all;
    }
  });
  float total = 0.0f;
  for (const float l : row_loss) total = total + l;
  const float loss = total / static_cast<float>(rows);
  traced.outputs({trace::f32("loss", &loss, 1), trace::f32("row_max", row_max, rows),
                  trace::f32("row_sum", row_sum, rows)});
  return loss;
}

void cross_entropy_smoothed_backward(std::int64_t rows, std::int64_t classes, const float* logits,
                                     const std::int64_t* targets, float eps, const float* row_max,
                                     const float* row_sum, float g, float* dlogits) {
  trace::Call traced(
      "cross_entropy_smoothed_backward",
      {trace::integer("rows", rows), trace::integer("classes", classes), trace::real("eps", eps),
       trace::real("dloss", g)},
      {trace::f32("logits", logits, rows * classes), trace::i64("targets", targets, rows),
       trace::f32("row_max", row_max, rows), trace::f32("row_sum", row_sum, rows)});
  const float keep = 1.0f - eps, spread = eps / static_cast<float>(classes);
  const float scale = g / static_cast<float>(rows);
  parallel_for(rows, 16, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t r = begin; r < end; ++r) {
      const float* in = logits + r * classes;
      float* out = dlogits + r * classes;
      for (std::int64_t j = 0; j < classes; ++j) {
        const float p = vt_exp(in[j] - row_max[r]) / row_sum[r];
        const float target = (j == targets[r] ? keep : 0.0f) + spread;
        out[j] = (p - target) * scale;
      }
    }
  });
  traced.outputs({trace::f32("dlogits", dlogits, rows * classes)});
}

float bce_with_logits(std::int64_t n, const float* x, const float* target) {
  trace::Call traced("bce_with_logits", {trace::integer("n", n)},
                     {trace::f32("x", x, n), trace::f32("target", target, n)});
  float total = 0.0f;
  for (std::int64_t i = 0; i < n; ++i) {
    const float neg = -x[i];
    const float mv = neg > 0.0f ? neg : 0.0f;
    const float l = ((1.0f - target[i]) * x[i] + mv) + vt_log(vt_exp(-mv) + vt_exp(neg - mv));
    total = total + l;
  }
  const float loss = total / static_cast<float>(n);
  traced.outputs({trace::f32("loss", &loss, 1)});
  return loss;
}

void bce_with_logits_backward(std::int64_t n, const float* x, const float* target, float g,
                              float* dx) {
  trace::Call traced("bce_with_logits_backward", {trace::integer("n", n), trace::real("dloss", g)},
                     {trace::f32("x", x, n), trace::f32("target", target, n)});
  const float scale = g / static_cast<float>(n);
  parallel_for(n, 8192, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) dx[i] = (vt_sigmoid(x[i]) - target[i]) * scale;
  });
  traced.outputs({trace::f32("dx", dx, n)});
}

}  // namespace vt::kernels
