#pragma once
// One layer and direction of an LSTM, GRU or Elman RNN (tanh or ReLU) in the portable arithmetic
// (docs/portable.md, "Recurrent layers"): the input projection of every step as one Linear, then
// the steps in order (backwards for the reverse direction), each a Linear of the hidden state and
// the gate equations; backward through time in the reverse order, then the weights' gradients as
// Linear's over the T·B rows in (t, b) order. Time-major, contiguous: x [T, B, I], y [T, B, H].

#include <cstdint>

namespace vt::kernels {

// In trace order: a step trace's `cell` parameter is the index.
enum class Cell { kLstm, kGru, kTanh, kRelu };

struct RnnShape {
  Cell cell = Cell::kLstm;
  std::int64_t steps = 1, batch = 1, input = 1, hidden = 1;
  bool reverse = false;
  // An LSTM's proj_size P (0: none): h = (o ⊗ tanh(c))·W_hrᵀ, P wide, W_hr [P, H].
  std::int64_t proj = 0;
  bool elman() const { return cell == Cell::kTanh || cell == Cell::kRelu; }
  std::int64_t gate_rows() const {
    return (cell == Cell::kLstm ? 4 : cell == Cell::kGru ? 3 : 1) * hidden;
  }
  // h's width (y, h0, hn and W_hh's rows): P with a projection, else H.
  std::int64_t width() const { return proj > 0 ? proj : hidden; }
  // What forward keeps for backward: the activated gates and c (LSTM) or R_n (GRU) of each step,
  // and o ⊗ tanh(c) where it is projected; an Elman cell's one gate is its output.
  std::int64_t saved_floats() const {
    return steps * batch * (gate_rows() + (elman() ? 0 : hidden) + (proj > 0 ? hidden : 0));
  }
};

// c0, cn: LSTM only (null for a GRU). Biases may be null (has_biases false); w_hr with proj.
void rnn_forward(const RnnShape& s, const float* x, const float* h0, const float* c0,
                 const float* w_ih, const float* w_hh, const float* b_ih, const float* b_hh,
                 float* y, float* hn, float* cn, float* saved, const float* w_hr = nullptr);

// dy [T, B, width]; dhn, dcn: the final states' gradients, or null for none. Any output may be
// null where not needed (db_* when there are no biases).
void rnn_backward(const RnnShape& s, const float* x, const float* h0, const float* c0,
                  const float* w_ih, const float* w_hh, const float* y, const float* saved,
                  const float* dy, const float* dhn, const float* dcn, float* dx, float* dh0,
                  float* dc0, float* dw_ih, float* dw_hh, float* db_ih, float* db_hh,
                  const float* w_hr = nullptr, float* dw_hr = nullptr);

}  // namespace vt::kernels
