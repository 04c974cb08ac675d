#include "tests/dispute/kernel_calls.h"

#include <cmath>
#include <cstdint>

#include "kernels/activation.h"
#include "kernels/conv.h"
#include "kernels/gemm.h"
#include "kernels/loss.h"
#include "kernels/norm.h"
#include "kernels/optim.h"
#include "kernels/pointwise.h"
#include "kernels/pool.h"
#include "kernels/products.h"
#include "kernels/reduce.h"
#include "kernels/rnn.h"
#include "kernels/softmax.h"
#include "kernels/upsample.h"

namespace vt::testing {

std::vector<float> ramp(std::size_t n, float scale, float offset) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = std::sin(static_cast<float>(i) * 0.37f + offset) * scale;
  return v;
}

std::vector<float> ramp(std::initializer_list<std::size_t> shape, float scale, float offset) {
  std::size_t n = 1;
  for (std::size_t extent : shape) n *= extent;
  return ramp(n, scale, offset);
}

namespace {

// The operators the zoo's gpt and cnn steps do not call, or not in these forms.
void run_more_kernels() {
  const auto x = ramp({4, 6}, 2.0f, 0.3f), dy = ramp({4, 6}, 0.5f, 1.7f);
  std::vector<float> y(x.size()), dx(x.size());
  kernels::log_softmax(4, 6, x.data(), y.data());
  kernels::log_softmax_backward(4, 6, y.data(), dy.data(), dx.data());
  kernels::relu(24, x.data(), y.data());
  kernels::relu_backward(24, y.data(), dy.data(), dx.data());
  std::vector<float> mean(4);
  kernels::row_mean(4, 6, x.data(), mean.data());
  kernels::row_mean_backward(4, 6, mean.data(), dx.data());
  kernels::mse(24, x.data(), dy.data());
  kernels::mse_backward(24, x.data(), dy.data(), 0.5f, dx.data());
  std::vector<float> sums(6);
  kernels::column_sums(4, 6, x.data(), 6, sums.data());
  kernels::dropout_backward(24, dy.data(), 0.5f, 9, 1, dx.data());
  const std::int64_t ids[] = {2, 0, 2, 1};
  std::vector<float> table(std::size_t{3} * 6);
  kernels::embedding_backward(4, 6, 3, ids, dy.data(), table.data());
  std::vector<float> lmean(4), rstd(4), dw(6), db(6);
  kernels::layer_norm(4, 6, x.data(), dy.data(), nullptr, 1e-5f, y.data(), lmean.data(),
                      rstd.data());
  kernels::layer_norm_backward(4, 6, x.data(), dy.data(), lmean.data(), rstd.data(), dy.data(),
                               dx.data(), dw.data(), db.data());
  kernels::BatchNormShape bn{2, 3, 4};
  std::vector<float> bmean(3), binv(3), bdw(3), bdb(3);
  kernels::batch_norm_train(bn, x.data(), sums.data(), sums.data() + 3, 1e-5f, 0.1f, nullptr,
                            nullptr, y.data(), bmean.data(), binv.data(), false);
  kernels::batch_norm_backward(bn, x.data(), sums.data(), bmean.data(), binv.data(), dy.data(),
                               dx.data(), bdw.data(), bdb.data());
  kernels::ConvShape cs;
  cs.batch = 2;
  cs.in_channels = 2;
  cs.out_channels = 3;
  cs.in[2] = 6;
  cs.kernel[2] = 3;
  cs.stride[2] = 2;
  const auto cw = ramp({3, 2, 3}, 0.4f, 0.9f), cb = ramp(3, 0.1f);
  std::vector<float> cy(std::size_t{2} * 3 * 2), cdx(x.size()), cdw(cw.size()), cdb(3);
  kernels::grouped_conv_forward(cs, 1, x.data(), cw.data(), cb.data(), cy.data());
  kernels::grouped_conv_backward(cs, 1, x.data(), cw.data(), cy.data(), cdx.data(), cdw.data(),
                                 cdb.data());
  std::vector<float> param = ramp(8, 1.0f), buffer(8);
  kernels::SgdStep sgd;
  sgd.lr = 0.05f;
  sgd.momentum = 0.9f;
  sgd.weight_decay = 5e-4f;
  sgd.nesterov = true;
  sgd.first = true;
  kernels::sgd_update(8, sgd, param.data(), dy.data(), buffer.data());
  sgd.first = false;
  kernels::sgd_update(8, sgd, param.data(), dy.data(), buffer.data());
  // Activations: one whose backward reads its output, two that read parameters.
  kernels::ActivationParams act;
  act.min_val = -0.5f;
  act.max_val = 0.75f;
  act.beta = 2.0f;
  for (const kernels::Activation f : {kernels::Activation::kSigmoid, kernels::Activation::kHardtanh,
                                      kernels::Activation::kSoftplus}) {
    kernels::activation(f, act, 24, x.data(), y.data());
    const bool reads_output = kernels::backward_reads_output(f);
    kernels::activation_backward(f, act, 24, reads_output ? nullptr : x.data(),
                                 reads_output ? y.data() : nullptr, dy.data(), dx.data());
  }
}

// The operators of real models: pools (one window over padding alone, so an argmax of −1),
// group norm with and without its affine parameters, baddbmm with and without its addend,
// recurrent layers, the further losses and the reductions.
void run_real_model_kernels() {
  kernels::PoolShape ps;
  ps.planes = 3;
  ps.in_h = 5;
  ps.in_w = 4;
  ps.kernel_h = ps.kernel_w = 2;
  ps.stride_h = ps.stride_w = 2;
  ps.pad_h = ps.pad_w = 1;
  ps.out_h = kernels::pool_out_size(5, 2, 2, 1, 1, true);  // 4: the last window is over padding
  ps.out_w = kernels::pool_out_size(4, 2, 2, 1, 1, false);
  const auto px = ramp({3, 5, 4}, 2.5f, 0.2f);
  const std::int64_t outs = 3 * ps.out_h * ps.out_w;
  const auto pdy = ramp(static_cast<std::size_t>(outs), 0.7f, 1.1f);
  std::vector<float> py(static_cast<std::size_t>(outs)), pdx(px.size());
  std::vector<std::int64_t> argmax(static_cast<std::size_t>(outs));
  kernels::max_pool2d(ps, px.data(), py.data(), argmax.data());
  kernels::max_pool2d_backward(ps, argmax.data(), pdy.data(), pdx.data());
  kernels::AvgPoolOptions avg{false, 0};
  kernels::avg_pool2d(ps, avg, px.data(), py.data());
  kernels::avg_pool2d_backward(ps, avg, pdy.data(), pdx.data());
  kernels::PoolShape as;
  as.planes = 3;
  as.in_h = 5;
  as.in_w = 4;
  as.out_h = 3;
  as.out_w = 2;
  std::vector<float> ay(std::size_t{3} * 3 * 2), ady = ramp({3, 3, 2}, 0.3f, 0.4f);
  kernels::adaptive_avg_pool2d(as, px.data(), ay.data());
  kernels::adaptive_avg_pool2d_backward(as, ady.data(), pdx.data());
  kernels::adaptive_max_pool2d(as, px.data(), ay.data(), argmax.data());
  kernels::PoolShape us = as;  // 5 × 4 → 7 × 9, px's planes
  us.out_h = 7;
  us.out_w = 9;
  const kernels::BilinearOptions bilinear{false, kernels::upsample_scale(5, 7, false, 0.0),
                                          kernels::upsample_scale(4, 9, false, 0.0)};
  std::vector<float> uy(std::size_t{3} * 7 * 9), udy = ramp({3, 7, 9}, 0.2f, 0.7f);
  kernels::upsample_bilinear2d(us, bilinear, px.data(), uy.data());
  kernels::upsample_bilinear2d_backward(us, bilinear, udy.data(), pdx.data());
  kernels::NearestShape ns;  // px's planes again
  ns.planes = 3;
  ns.in[1] = 5, ns.in[2] = 4;
  ns.out[1] = 7, ns.out[2] = 9;
  ns.scale[1] = bilinear.scale_h, ns.scale[2] = bilinear.scale_w;
  kernels::upsample_nearest(ns, px.data(), uy.data());
  kernels::upsample_nearest_backward(ns, udy.data(), pdx.data());
  const auto gx = ramp({2, 4, 3}, 1.7f, 0.6f), gw = ramp(4, 0.5f, 1.3f), gb = ramp(4, 0.2f, 2.1f);
  std::vector<float> gy(gx.size()), gmean(8), grstd(8), gdx(gx.size()), gdw(4), gdb(4);
  kernels::group_norm(2, 4, 3, 2, gx.data(), gw.data(), gb.data(), 1e-5f, gy.data(), gmean.data(),
                      grstd.data());
  kernels::group_norm_backward(2, 4, 3, 2, gx.data(), gw.data(), gmean.data(), grstd.data(),
                               gy.data(), gdx.data(), gdw.data(), gdb.data());
  kernels::group_norm(2, 4, 3, 4, gx.data(), nullptr, nullptr, 1e-5f, gy.data(), gmean.data(),
                      grstd.data());
  const auto ba = ramp({2, 3, 4}, 0.9f, 0.1f), bb = ramp({2, 4, 5}, 1.1f, 0.8f),
             bc = ramp({2, 3, 5}, 0.4f, 1.9f);
  std::vector<float> bmm_y(bc.size()), bda(ba.size()), bdb(bb.size()), bdc(bc.size());
  kernels::baddbmm(2, 3, 5, 4, ba.data(), bb.data(), bc.data(), 0.125f, 0.5f, bmm_y.data());
  kernels::baddbmm(2, 3, 5, 4, ba.data(), bb.data(), nullptr, 1.0f, 1.0f, bmm_y.data());
  kernels::baddbmm_backward(2, 3, 5, 4, ba.data(), bb.data(), bc.data(), 0.125f, 0.5f, bda.data(),
                            bdb.data(), bdc.data());
  // An LSTM layer forwards (biases, a final state's gradient), and a GRU layer and both Elman
  // cells in reverse (none).
  for (const kernels::Cell cell :
       {kernels::Cell::kLstm, kernels::Cell::kGru, kernels::Cell::kTanh, kernels::Cell::kRelu}) {
    const bool lstm = cell == kernels::Cell::kLstm;
    kernels::RnnShape rs{cell, 3, 2, 4, 3, !lstm};
    const std::int64_t G = rs.gate_rows(), state = rs.batch * rs.hidden;
    const auto rx = ramp({3, 2, 4}, 0.8f, 0.5f), h0 = ramp(6, 0.3f, 1.2f), c0 = ramp(6, 0.4f, 2.2f);
    const auto w_ih = ramp(static_cast<std::size_t>(G * 4), 0.5f, 0.7f),
               w_hh = ramp(static_cast<std::size_t>(G * 3), 0.45f, 1.4f),
               b_ih = ramp(static_cast<std::size_t>(G), 0.1f, 0.2f),
               b_hh = ramp(static_cast<std::size_t>(G), 0.15f, 0.9f);
    std::vector<float> ry(static_cast<std::size_t>(3 * state)), hn(6), cn(6),
        saved(static_cast<std::size_t>(rs.saved_floats()));
    kernels::rnn_forward(rs, rx.data(), h0.data(), lstm ? c0.data() : nullptr, w_ih.data(),
                         w_hh.data(), lstm ? b_ih.data() : nullptr, lstm ? b_hh.data() : nullptr,
                         ry.data(), hn.data(), lstm ? cn.data() : nullptr, saved.data());
    const auto rdy = ramp(ry.size(), 0.6f, 0.3f), dhn = ramp(6, 0.2f, 0.8f);
    std::vector<float> rdx(rx.size()), dh0(6), dc0(6), dw_ih(w_ih.size()), dw_hh(w_hh.size()),
        db_ih(b_ih.size()), db_hh(b_hh.size());
    kernels::rnn_backward(rs, rx.data(), h0.data(), lstm ? c0.data() : nullptr, w_ih.data(),
                          w_hh.data(), ry.data(), saved.data(), rdy.data(),
                          lstm ? dhn.data() : nullptr, lstm ? dhn.data() : nullptr, rdx.data(),
                          dh0.data(), lstm ? dc0.data() : nullptr, dw_ih.data(), dw_hh.data(),
                          lstm ? db_ih.data() : nullptr, lstm ? db_hh.data() : nullptr);
  }
  {  // Integers of a range wider than INT64_MAX, and of a small one.
    std::vector<std::int64_t> ints(9);
    kernels::randint(9, -(std::int64_t{1} << 62) - (std::int64_t{1} << 61), std::int64_t{1} << 62,
                     77, 5, ints.data());
    kernels::randint(9, -2, 3, 78, 6, ints.data());
  }
  {  // An LSTM layer with a projection (proj_size 2 of hidden 3), its w_hr's gradient too.
    kernels::RnnShape ps{kernels::Cell::kLstm, 3, 2, 4, 3, false, 2};
    const std::int64_t G = ps.gate_rows();
    const auto px = ramp({3, 2, 4}, 0.7f, 0.6f), h0 = ramp(4, 0.3f, 1.1f), c0 = ramp(6, 0.4f, 2.0f);
    const auto w_ih = ramp(static_cast<std::size_t>(G * 4), 0.5f, 0.8f),
               w_hh = ramp(static_cast<std::size_t>(G * 2), 0.45f, 1.3f),
               w_hr = ramp(6, 0.55f, 0.35f);
    std::vector<float> py(12), hn(4), cn(6), saved(static_cast<std::size_t>(ps.saved_floats()));
    kernels::rnn_forward(ps, px.data(), h0.data(), c0.data(), w_ih.data(), w_hh.data(), nullptr,
                         nullptr, py.data(), hn.data(), cn.data(), saved.data(), w_hr.data());
    const auto pdy = ramp(py.size(), 0.6f, 0.4f), dhn = ramp(4, 0.2f, 0.7f),
               dcn = ramp(6, 0.25f, 0.9f);
    std::vector<float> pdx(px.size()), dh0(4), dc0(6), dw_ih(w_ih.size()), dw_hh(w_hh.size()),
        dw_hr(w_hr.size());
    kernels::rnn_backward(ps, px.data(), h0.data(), c0.data(), w_ih.data(), w_hh.data(), py.data(),
                          saved.data(), pdy.data(), dhn.data(), dcn.data(), pdx.data(), dh0.data(),
                          dc0.data(), dw_ih.data(), dw_hh.data(), nullptr, nullptr, w_hr.data(),
                          dw_hr.data());
  }
  // The further losses (one row ignored), and every reduction over two of three dimensions.
  const auto logits = ramp({4, 5}, 2.0f, 0.4f), probs = ramp({4, 5}, 0.5f, 1.3f);
  const std::int64_t classes_of[] = {1, -100, 4, 0};
  std::vector<float> grad(20), row_max(4), row_sum(4);
  kernels::nll_loss(4, 5, logits.data(), classes_of, -100);
  kernels::nll_loss_backward(4, 5, classes_of, -100, 0.5f, grad.data());
  const std::int64_t kept_classes[] = {1, 3, 4, 0};
  kernels::cross_entropy_smoothed(4, 5, logits.data(), kept_classes, 0.1f, row_max.data(),
                                  row_sum.data());
  kernels::cross_entropy_smoothed_backward(4, 5, logits.data(), kept_classes, 0.1f, row_max.data(),
                                           row_sum.data(), 1.0f, grad.data());
  kernels::bce_with_logits(20, logits.data(), probs.data());
  kernels::bce_with_logits_backward(20, logits.data(), probs.data(), 0.25f, grad.data());
  const kernels::ReduceShape rs({2, 3, 4}, {true, false, true});
  const auto rx = ramp(24, 1.5f, 0.9f), rdy = ramp(3, 0.7f, 0.2f);
  std::vector<float> ry(3), rdx(24);
  for (const kernels::Reduction r : {kernels::Reduction::kSum, kernels::Reduction::kMean,
                                     kernels::Reduction::kAmax, kernels::Reduction::kLogsumexp}) {
    kernels::reduce(r, rs, rx.data(), ry.data());
    kernels::reduce_backward(r, rs, rx.data(), ry.data(), rdy.data(), rdx.data());
  }
  // Channel dropout and a Bernoulli draw (stochastic depth), from a stream state of the top bit.
  const std::uint64_t state = 0x9e3779b97f4a7c15ull;
  kernels::feature_dropout(2, 3, 4, rx.data(), 0.5f, state, 7, rdx.data());
  kernels::feature_dropout_backward(2, 3, 4, rx.data(), 0.5f, state, 7, rdx.data());
  kernels::bernoulli(24, 0.3f, state, 8, rdx.data());
  // A batch norm in evaluation (a frozen one in a training step), without its affine parameters.
  const auto running_mean = ramp(3, 0.4f, 0.1f), running_var = ramp(3, 0.3f, 2.0f);
  std::vector<float> var(3);
  for (std::size_t c = 0; c < 3; ++c) var[c] = running_var[c] * running_var[c] + 0.5f;
  kernels::batch_norm_eval({2, 3, 4}, rx.data(), nullptr, nullptr, running_mean.data(), var.data(),
                           1e-5f, rdx.data());
}

}  // namespace

// A handful of kernel calls of every shape of operand the trace knows: strided and batched
// products, in-place updates, optional operands, ids, a grouped convolution.
void run_kernels() {
  const auto x = ramp({6, 8}, 1.5f);
  const auto w = ramp({8, 5}, 0.5f, 1.0f);
  std::vector<float> y(std::size_t{6} * 5), yt(std::size_t{5} * 6);
  kernels::gemm(6, 5, 8, {x.data(), 8, 1}, {w.data(), 1, 8}, y.data(), 5);          // x · wᵀ
  kernels::gemm(5, 6, 8, {w.data(), 1, 5}, {x.data(), 1, 8}, yt.data(), 6, false);  // strided
  const auto bias = ramp(5, 0.1f, 2.0f);
  kernels::add_bias(6, 5, y.data(), bias.data());
  std::vector<float> g(y.size()), dg(y.size());
  kernels::gelu(static_cast<std::int64_t>(y.size()), y.data(), g.data());
  kernels::gelu_backward(static_cast<std::int64_t>(y.size()), y.data(), g.data(), dg.data());
  std::vector<float> sm(std::size_t{4} * 4 * 2), dsm(sm.size());
  const auto logits = ramp(sm.size(), 3.0f);
  kernels::softmax(8, 4, logits.data(), 2.0f, true, sm.data());
  kernels::softmax_backward(8, 4, sm.data(), logits.data(), 2.0f, true, dsm.data());
  std::vector<float> ln(y.size()), mean(6), rstd(6);
  kernels::layer_norm(6, 5, y.data(), bias.data(), nullptr, 1e-5f, ln.data(), mean.data(),
                      rstd.data());
  const std::int64_t targets[] = {0, 4, 2, 1, 3, 4};
  std::vector<float> row_max(6), row_sum(6), dlogits(y.size());
  kernels::cross_entropy(6, 5, y.data(), targets, row_max.data(), row_sum.data());
  kernels::cross_entropy_backward(6, 5, y.data(), targets, row_max.data(), row_sum.data(), 1.0f,
                                  dlogits.data());
  const std::int64_t ids[] = {3, 0, 3, 1};
  std::vector<float> emb(std::size_t{4} * 5);
  kernels::embedding(4, 5, ids, y.data(), emb.data());
  std::vector<float> drop(y.size());
  kernels::dropout(static_cast<std::int64_t>(y.size()), y.data(), 0.25f, 77, 3, drop.data());
  kernels::BatchNormShape bn{4, 3, 5};
  const auto bx = ramp(60, 2.0f);
  std::vector<float> by(60), bmean(3), binv(3), rm(3, 0.0f), rv(3, 1.0f);
  kernels::batch_norm_train(bn, bx.data(), nullptr, nullptr, 1e-5f, 0.1f, rm.data(), rv.data(),
                            by.data(), bmean.data(), binv.data(), true);
  kernels::ConvShape cs;
  cs.batch = 2;
  cs.in_channels = 4;
  cs.out_channels = 2;
  cs.in[1] = 5;
  cs.in[2] = 5;
  cs.kernel[1] = 3;
  cs.kernel[2] = 3;
  cs.padding[1] = 1;
  cs.padding[2] = 1;
  const auto cx = ramp({2, 4, 25}, 1.0f), cw = ramp({2, 2, 9}, 0.3f, 0.5f);
  std::vector<float> cy(std::size_t{2} * 2 * 25);
  kernels::grouped_conv_forward(cs, 2, cx.data(), cw.data(), nullptr, cy.data());
  std::vector<float> cdx(cx.size()), cdw(cw.size()), cdb(2);
  kernels::grouped_conv_backward(cs, 2, cx.data(), cw.data(), cy.data(), cdx.data(), cdw.data(),
                                 cdb.data());
  std::vector<float> param = ramp(10, 1.0f), grad = ramp(10, 0.1f, 4.0f), m(10, 0.0f), v(10, 0.0f);
  kernels::AdamStep s;
  s.lr = 1e-3f;
  s.lr_over_bias1 = 1e-2f;
  s.bias2_sqrt = 0.0316f;
  s.weight_decay = 0.01f;
  kernels::adam_update(10, s, param.data(), grad.data(), m.data(), v.data());
  run_more_kernels();
  run_real_model_kernels();
}

}  // namespace vt::testing
