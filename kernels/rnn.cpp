#include "kernels/rnn.h"

#include <algorithm>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/parallel.h"
#include "kernels/pointwise.h"
#include "kernels/scalar.h"
#include "kernels/trace.h"

namespace vt::kernels {
namespace {

// Linear's arithmetic: out [rows, n] = in [rows, k] · wᵀ (w [n, k]), then + bias.
void linear(std::int64_t rows, std::int64_t n, std::int64_t k, const float* in, const float* w,
            const float* bias, float* out) {
  gemm(rows, n, k, {in, k, 1}, {w, 1, k}, out, n);
  if (bias != nullptr) add_bias(rows, n, out, bias);
}

// The time index of step `step` of the pass.
std::int64_t time_of(const RnnShape& s, std::int64_t step) {
  return s.reverse ? s.steps - 1 - step : step;
}

// The hidden state step `step` starts from: h0, or the output of the step before.
const float* h_before(const RnnShape& s, std::int64_t step, const float* h0, const float* y) {
  return step == 0 ? h0 : y + time_of(s, step - 1) * s.batch * s.width();
}
const float* c_before(const RnnShape& s, std::int64_t step, const float* c0, const float* cs) {
  return step == 0 ? c0 : cs + time_of(s, step - 1) * s.batch * s.hidden;
}

// The call's parameters; proj only where there is one, so that the calls of layers without it
// are as they always were.
std::vector<trace::Param> rnn_params(const RnnShape& s) {
  std::vector<trace::Param> params = {trace::integer("cell", static_cast<std::int64_t>(s.cell)),
                                      trace::integer("steps", s.steps),
                                      trace::integer("batch", s.batch),
                                      trace::integer("input", s.input),
                                      trace::integer("hidden", s.hidden),
                                      trace::integer("reverse", s.reverse ? 1 : 0)};
  if (s.proj > 0) params.push_back(trace::integer("proj", s.proj));
  return params;
}

// The operands forward and backward both trace first: the layer's input, state and weights.
std::vector<trace::Operand> layer_operands(const RnnShape& s, const float* x, const float* h0,
                                           const float* c0, const float* w_ih, const float* w_hh) {
  const std::int64_t B = s.batch, G = s.gate_rows();
  const bool lstm = s.cell == Cell::kLstm;
  return {trace::f32("x", x, s.steps * B * s.input), trace::f32("h0", h0, B * s.width()),
          trace::f32_or_none("c0", lstm ? c0 : nullptr, B * s.hidden),
          trace::f32("w_ih", w_ih, G * s.input), trace::f32("w_hh", w_hh, G * s.width())};
}

}  // namespace

void rnn_forward(const RnnShape& s, const float* x, const float* h0, const float* c0,
                 const float* w_ih, const float* w_hh, const float* b_ih, const float* b_hh,
                 float* y, float* hn, float* cn, float* saved, const float* w_hr) {
  const std::int64_t H = s.hidden, W = s.width(), G = s.gate_rows(), B = s.batch;
  const std::int64_t TB = s.steps * B;
  const bool lstm = s.cell == Cell::kLstm, projected = s.proj > 0;
  // One call for the layer and direction: its products and gate steps are part of it.
  const auto params = rnn_params(s);
  std::vector<trace::Operand> inputs = layer_operands(s, x, h0, c0, w_ih, w_hh);
  inputs.push_back(trace::f32_or_none("b_ih", b_ih, G));
  inputs.push_back(trace::f32_or_none("b_hh", b_hh, G));
  if (projected) inputs.push_back(trace::f32("w_hr", w_hr, s.proj * H));
  trace::Call traced("rnn", params, inputs);
  std::vector<float> xs(static_cast<std::size_t>(TB * G)), r(static_cast<std::size_t>(B * G));
  linear(TB, G, s.input, x, w_ih, b_ih, xs.data());
  float* acts = saved;            // [T, B, G]
  float* extra = saved + TB * G;  // [T, B, H]: c (LSTM) or R_n (GRU); none (Elman)
  float* unprojected = projected ? extra + TB * H : nullptr;  // [T, B, H]: o ⊗ tanh(c), projected
  for (std::int64_t step = 0; step < s.steps; ++step) {
    const std::int64_t t = time_of(s, step);
    const float* hp = h_before(s, step, h0, y);
    linear(B, G, W, hp, w_hh, b_hh, r.data());
    parallel_for(B, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t b = begin; b < end; ++b) {
        const float* xg = xs.data() + (t * B + b) * G;
        const float* rg = r.data() + b * G;
        float* a = acts + (t * B + b) * G;
        float* e = s.elman() ? nullptr : extra + (t * B + b) * H;
        float* h = projected ? unprojected + (t * B + b) * H : y + (t * B + b) * W;
        const float* hprev = hp + b * W;
        if (s.cell == Cell::kLstm) {
          const float* cprev = c_before(s, step, c0, extra) + b * H;
          for (std::int64_t j = 0; j < H; ++j) {
            const float i = vt_sigmoid(xg[j] + rg[j]);
            const float f = vt_sigmoid(xg[H + j] + rg[H + j]);
            const float g = vt_tanh(xg[2 * H + j] + rg[2 * H + j]);
            const float o = vt_sigmoid(xg[3 * H + j] + rg[3 * H + j]);
            const float c = f * cprev[j] + i * g;
            a[j] = i, a[H + j] = f, a[2 * H + j] = g, a[3 * H + j] = o;
            e[j] = c;
            h[j] = o * vt_tanh(c);
          }
        } else if (s.elman()) {
          for (std::int64_t j = 0; j < H; ++j) {
            const float pre = xg[j] + rg[j];
            a[j] = s.cell == Cell::kTanh ? vt_tanh(pre) : (pre <= 0.0f ? 0.0f : pre);
            h[j] = a[j];
          }
        } else {
          for (std::int64_t j = 0; j < H; ++j) {
            const float rr = vt_sigmoid(xg[j] + rg[j]);
            const float z = vt_sigmoid(xg[H + j] + rg[H + j]);
            const float n = vt_tanh(xg[2 * H + j] + rr * rg[2 * H + j]);
            a[j] = rr, a[H + j] = z, a[2 * H + j] = n;
            e[j] = rg[2 * H + j];
            h[j] = (1.0f - z) * n + z * hprev[j];
          }
        }
      }
    });
    // The projection, Linear's arithmetic without a bias: h = (o ⊗ tanh(c))·W_hrᵀ.
    if (projected) linear(B, W, H, unprojected + t * B * H, w_hr, nullptr, y + t * B * W);
  }
  const std::int64_t last = time_of(s, s.steps - 1);
  std::copy(y + last * B * W, y + (last + 1) * B * W, hn);
  if (cn != nullptr && lstm) std::copy(extra + last * B * H, extra + (last + 1) * B * H, cn);
  traced.outputs({trace::f32("y", y, TB * W), trace::f32("hn", hn, B * W),
                  trace::f32_or_none("cn", lstm ? cn : nullptr, B * H),
                  trace::f32("saved", saved, s.saved_floats())});
}

void rnn_backward(const RnnShape& s, const float* x, const float* h0, const float* c0,
                  const float* w_ih, const float* w_hh, const float* y, const float* saved,
                  const float* dy, const float* dhn, const float* dcn, float* dx, float* dh0,
                  float* dc0, float* dw_ih, float* dw_hh, float* db_ih, float* db_hh,
                  const float* w_hr, float* dw_hr) {
  const std::int64_t H = s.hidden, W = s.width(), G = s.gate_rows(), B = s.batch;
  const std::int64_t TB = s.steps * B, x_count = TB * s.input;
  const bool lstm = s.cell == Cell::kLstm, gru = s.cell == Cell::kGru, projected = s.proj > 0;
  const auto params = rnn_params(s);
  std::vector<trace::Operand> inputs = layer_operands(s, x, h0, c0, w_ih, w_hh);
  for (const trace::Operand& o :
       {trace::f32("y", y, TB * W), trace::f32("saved", saved, s.saved_floats()),
        trace::f32("dy", dy, TB * W), trace::f32_or_none("dhn", dhn, B * W),
        trace::f32_or_none("dcn", lstm ? dcn : nullptr, B * H)})
    inputs.push_back(o);
  if (projected) inputs.push_back(trace::f32("w_hr", w_hr, s.proj * H));
  trace::Call traced("rnn_backward", params, inputs);
  const float* acts = saved;
  const float* extra = saved + TB * G;
  const float* unprojected = projected ? extra + TB * H : nullptr;
  // dX: the input projection's gradient, dR: the hidden projection's (the same but for the GRU).
  std::vector<float> d_x(static_cast<std::size_t>(TB * G)), d_r(gru ? d_x.size() : 0);
  float* const dR = gru ? d_r.data() : d_x.data();
  std::vector<float> dh_next(static_cast<std::size_t>(B * W), 0.0f);
  std::vector<float> dc_next(static_cast<std::size_t>(B * H), 0.0f);
  if (dhn != nullptr) std::copy(dhn, dhn + B * W, dh_next.begin());
  if (dcn != nullptr && lstm) std::copy(dcn, dcn + B * H, dc_next.begin());
  std::vector<float> direct(gru ? static_cast<std::size_t>(B * H) : 0);
  // Projected: each step's dh (P wide) by time index, for dW_hr, and its gradient through W_hr.
  std::vector<float> dh_steps(projected ? static_cast<std::size_t>(TB * W) : 0);
  std::vector<float> dh_unprojected(projected ? static_cast<std::size_t>(B * H) : 0);
  for (std::int64_t step = s.steps - 1; step >= 0; --step) {
    const std::int64_t t = time_of(s, step);
    const float* hp = h_before(s, step, h0, y);
    if (projected) {
      float* dh = dh_steps.data() + t * B * W;
      for (std::int64_t k = 0; k < B * W; ++k) dh[k] = dy[t * B * W + k] + dh_next[k];
      gemm(B, H, W, {dh, W, 1}, {w_hr, H, 1}, dh_unprojected.data(), H);
    }
    parallel_for(B, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t b = begin; b < end; ++b) {
        const float* a = acts + (t * B + b) * G;
        const float* e = s.elman() ? nullptr : extra + (t * B + b) * H;
        const float* g_out = dy + (t * B + b) * W;
        float* dn = dh_next.data() + b * W;
        float* dX = d_x.data() + (t * B + b) * G;
        if (lstm) {
          const float* cprev = c_before(s, step, c0, extra) + b * H;
          const float* dproj = projected ? dh_unprojected.data() + b * H : nullptr;
          float* dc_n = dc_next.data() + b * H;
          for (std::int64_t j = 0; j < H; ++j) {
            const float i = a[j], f = a[H + j], g = a[2 * H + j], o = a[3 * H + j];
            const float dh = projected ? dproj[j] : g_out[j] + dn[j];
            const float tc = vt_tanh(e[j]);
            const float dc = (dh * o) * (1.0f - tc * tc) + dc_n[j];
            dX[3 * H + j] = (dh * tc) * (o * (1.0f - o));
            dX[j] = (dc * g) * (i * (1.0f - i));
            dX[2 * H + j] = (dc * i) * (1.0f - g * g);
            dX[H + j] = (dc * cprev[j]) * (f * (1.0f - f));
            dc_n[j] = dc * f;
          }
        } else if (s.elman()) {
          for (std::int64_t j = 0; j < H; ++j) {
            const float dh = g_out[j] + dn[j];
            const float h = a[j];
            dX[j] = s.cell == Cell::kTanh ? dh * (1.0f - h * h) : (h <= 0.0f ? 0.0f : dh);
          }
        } else {
          const float* hprev = hp + b * H;
          float* dRr = dR + (t * B + b) * G;
          float* dd = direct.data() + b * H;
          for (std::int64_t j = 0; j < H; ++j) {
            const float r = a[j], z = a[H + j], n = a[2 * H + j];
            const float dh = g_out[j] + dn[j];
            const float dnn = dh * (1.0f - z);
            const float dz = dh * (hprev[j] - n);
            const float dan = dnn * (1.0f - n * n);
            const float dr = dan * e[j];
            const float dar = dr * (r * (1.0f - r));
            const float daz = dz * (z * (1.0f - z));
            dX[j] = dar, dX[H + j] = daz, dX[2 * H + j] = dan;
            dRr[j] = dar, dRr[H + j] = daz, dRr[2 * H + j] = dan * r;
            dd[j] = dh * z;
          }
        }
      }
    });
    // The hidden state before this step: the product chain over the gate rows, then (GRU) + dh·z.
    gemm(B, W, G, {dR + t * B * G, G, 1}, {w_hh, W, 1}, dh_next.data(), W);
    if (gru) {
      for (std::int64_t k = 0; k < B * H; ++k) dh_next[k] = dh_next[k] + direct[k];
    }
  }
  if (dh0 != nullptr) std::copy(dh_next.begin(), dh_next.end(), dh0);
  if (dc0 != nullptr && lstm) std::copy(dc_next.begin(), dc_next.end(), dc0);
  // The weights as Linear's over the T·B rows in (t, b) order; the hidden inputs in that order.
  if (dw_hh != nullptr) {
    std::vector<float> hprev(static_cast<std::size_t>(TB * W));
    for (std::int64_t step = 0; step < s.steps; ++step) {
      const std::int64_t t = time_of(s, step);
      const float* hp = h_before(s, step, h0, y);
      std::copy(hp, hp + B * W, hprev.begin() + t * B * W);
    }
    gemm(G, W, TB, {dR, 1, G}, {hprev.data(), W, 1}, dw_hh, W);
  }
  if (db_hh != nullptr) column_sums(TB, G, dR, G, db_hh);
  if (dw_ih != nullptr) gemm(G, s.input, TB, {d_x.data(), 1, G}, {x, s.input, 1}, dw_ih, s.input);
  if (db_ih != nullptr) column_sums(TB, G, d_x.data(), G, db_ih);
  if (dx != nullptr) gemm(TB, s.input, G, {d_x.data(), G, 1}, {w_ih, s.input, 1}, dx, s.input);
  if (projected && dw_hr != nullptr)
    gemm(W, H, TB, {dh_steps.data(), 1, W}, {unprojected, H, 1}, dw_hr, H);
  std::vector<trace::Operand> outputs = {trace::f32_or_none("dx", dx, x_count),
                                         trace::f32_or_none("dh0", dh0, B * W),
                                         trace::f32_or_none("dc0", lstm ? dc0 : nullptr, B * H),
                                         trace::f32_or_none("dw_ih", dw_ih, G * s.input),
                                         trace::f32_or_none("dw_hh", dw_hh, G * W),
                                         trace::f32_or_none("db_ih", db_ih, G),
                                         trace::f32_or_none("db_hh", db_hh, G)};
  if (projected) outputs.push_back(trace::f32_or_none("dw_hr", dw_hr, s.proj * H));
  traced.outputs(outputs);
}

}  // namespace vt::kernels
