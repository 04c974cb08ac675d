#pragma once
// One layer and direction of an LSTM or GRU in the portable arithmetic (docs/portable.md,
// "Recurrent layers"): the input projection of every step as one Linear, then the steps in order
// (backwards for the reverse direction), each a Linear of the hidden state and the gate
// equations; backward through time in the reverse order, then the weights' gradients as Linear's
// over the T·B rows in (t, b) order. Time-major, contiguous: x [T, B, I], y [T, B, H].

#include <cstdint>

namespace vt::kernels {

enum class Cell { kLstm, kGru };

struct RnnShape {
  Cell cell = Cell::kLstm;
  std::int64_t steps = 1, batch = 1, input = 1, hidden = 1;
  bool reverse = false;
  std::int64_t gate_rows() const { return (cell == Cell::kLstm ? 4 : 3) * hidden; }
  // What forward keeps for backward: the activated gates and c (LSTM) or R_n (GRU) of each step.
  std::int64_t saved_floats() const { return steps * batch * (gate_rows() + hidden); }
};

// c0, cn: LSTM only (null for a GRU). Biases may be null (has_biases false).
void rnn_forward(const RnnShape& s, const float* x, const float* h0, const float* c0,
                 const float* w_ih, const float* w_hh, const float* b_ih, const float* b_hh,
                 float* y, float* hn, float* cn, float* saved);

// dy [T, B, H]; dhn, dcn: the final states' gradients, or null for none. Any output may be null
// where not needed (db_* when there are no biases).
void rnn_backward(const RnnShape& s, const float* x, const float* h0, const float* c0,
                  const float* w_ih, const float* w_hh, const float* y, const float* saved,
                  const float* dy, const float* dhn, const float* dcn, float* dx, float* dh0,
                  float* dc0, float* dw_ih, float* dw_hh, float* db_ih, float* db_hh);

}  // namespace vt::kernels
