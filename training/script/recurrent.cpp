// The veritrain:: recurrent layers (docs/portable.md, "Recurrent layers"): aten::lstm, gru,
// rnn_tanh and rnn_relu as layers and directions of portable/layers.h's rnn_layer, with the
// task's dropout between layers. Registered beside script/operators.cpp's.
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "training/portable/layers.h"
#include "training/script/random.h"

namespace vt::training {
namespace {

using at::Tensor;
namespace P = portable;

// aten::lstm / gru / rnn_tanh / rnn_relu's flat parameters: per layer and direction w_ih, w_hh (and
// b_ih, b_hh).
std::vector<Tensor> stack_layers(const Tensor& input, const std::vector<Tensor>& h0s,
                                 const std::vector<Tensor>& c0s, const std::vector<Tensor>& params,
                                 bool has_biases, int64_t layers, double dropout_p, bool train,
                                 bool bidirectional, bool batch_first, kernels::Cell cell,
                                 std::vector<Tensor>& hn, std::vector<Tensor>& cn,
                                 bool projected = false) {
  // With an LSTM's proj_size each layer and direction has w_hr last.
  const int64_t dirs = bidirectional ? 2 : 1, per = (has_biases ? 4 : 2) + (projected ? 1 : 0);
  TORCH_CHECK(static_cast<int64_t>(params.size()) == layers * dirs * per,
              "portable rnn: ", params.size(), " parameters for ", layers, " layers");
  Tensor x = batch_first ? input.transpose(0, 1) : input;
  for (int64_t l = 0; l < layers; ++l) {
    std::vector<Tensor> outs;
    for (int64_t d = 0; d < dirs; ++d) {
      const std::size_t row = static_cast<std::size_t>(l * dirs + d);
      const std::size_t at = row * static_cast<std::size_t>(per);
      auto [y, h, c] =
          P::rnn_layer(x, h0s[row], cell == kernels::Cell::kLstm ? c0s[row] : Tensor(), params[at],
                       params[at + 1], has_biases ? params[at + 2] : Tensor(),
                       has_biases ? params[at + 3] : Tensor(), cell, d == 1,
                       projected ? params[at + static_cast<std::size_t>(per) - 1] : Tensor());
      outs.push_back(y);
      hn.push_back(h);
      if (cell == kernels::Cell::kLstm) cn.push_back(c);
    }
    x = dirs == 1 ? outs[0] : at::cat(outs, 2);
    // Between layers, not after the last: PyTorch's placement, the task's dropout stream's draw.
    if (l + 1 < layers) x = script_dropout(x, dropout_p, train);
  }
  return {batch_first ? x.transpose(0, 1) : x};
}

std::tuple<Tensor, Tensor, Tensor> lstm(const Tensor& input, at::TensorList hx,
                                        at::TensorList params, bool has_biases, int64_t layers,
                                        double dropout_p, bool train, bool bidirectional,
                                        bool batch_first) {
  TORCH_CHECK(hx.size() == 2 && input.dim() == 3, "portable lstm: batched input and (h0, c0)");
  // With proj_size each layer and direction has a fifth (or third) weight, w_hr.
  const int64_t dirs = bidirectional ? 2 : 1;
  const bool projected =
      static_cast<int64_t>(params.size()) == layers * dirs * (has_biases ? 5 : 3);
  std::vector<Tensor> hn, cn;
  const std::vector<Tensor> h0 = hx[0].unbind(0), c0 = hx[1].unbind(0);
  auto y = stack_layers(input, h0, c0, params.vec(), has_biases, layers, dropout_p, train,
                        bidirectional, batch_first, kernels::Cell::kLstm, hn, cn, projected);
  return {y[0], at::stack(hn), at::stack(cn)};
}

// aten::gru, rnn_tanh and rnn_relu: one state, h.
template <kernels::Cell kCell>
std::tuple<Tensor, Tensor> one_state_rnn(const Tensor& input, const Tensor& hx,
                                         at::TensorList params, bool has_biases, int64_t layers,
                                         double dropout_p, bool train, bool bidirectional,
                                         bool batch_first) {
  TORCH_CHECK(input.dim() == 3, "portable ",
              kCell == kernels::Cell::kGru    ? "gru"
              : kCell == kernels::Cell::kTanh ? "rnn_tanh"
                                              : "rnn_relu",
              ": batched input");
  std::vector<Tensor> hn, cn;
  auto y = stack_layers(input, hx.unbind(0), {}, params.vec(), has_biases, layers, dropout_p, train,
                        bidirectional, batch_first, kCell, hn, cn);
  return {y[0], at::stack(hn)};
}

}  // namespace

TORCH_LIBRARY_IMPL(veritrain, CompositeImplicitAutograd, m) {
  m.impl("lstm", &lstm);
  m.impl("gru", &one_state_rnn<kernels::Cell::kGru>);
  m.impl("rnn_tanh", &one_state_rnn<kernels::Cell::kTanh>);
  m.impl("rnn_relu", &one_state_rnn<kernels::Cell::kRelu>);
}

}  // namespace vt::training
