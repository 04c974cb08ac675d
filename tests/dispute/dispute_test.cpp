#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <regex>
#include <set>
#include <sstream>

#include "common/file_io.h"
#include "common/json.h"
#include "dispute/recompute.h"
#include "dispute/referee.h"
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
#include "tests/test_util.h"

namespace vt::dispute {
namespace {

std::vector<float> ramp(std::size_t n, float scale, float offset = 0.0f) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i)
    v[i] = std::sin(static_cast<float>(i) * 0.37f + offset) * scale;
  return v;
}

// Records every call's values as well as its hashes.
class CaptureAll : public kernels::trace::Sink {
 public:
  void begin(std::string_view op, std::span<const kernels::trace::Param> params,
             std::span<const kernels::trace::Operand> inputs) override {
    pending_.emplace(0);
    pending_->begin(op, params, inputs);
  }
  void end(std::span<const kernels::trace::Operand> outputs) override {
    pending_->end(outputs);
    calls.push_back(pending_->calls().front());
    values.push_back(*pending_->captured());
    pending_.reset();
  }
  std::vector<TracedCall> calls;
  std::vector<CallValues> values;

 private:
  std::optional<TraceRecorder> pending_;
};

// The operators the zoo's gpt and cnn steps do not call, or not in these forms.
void run_more_kernels() {
  const auto x = ramp(4 * 6, 2.0f, 0.3f), dy = ramp(4 * 6, 0.5f, 1.7f);
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
  std::vector<float> table(3 * 6);
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
  const auto cw = ramp(3 * 2 * 3, 0.4f, 0.9f), cb = ramp(3, 0.1f);
  std::vector<float> cy(2 * 3 * 2), cdx(x.size()), cdw(cw.size()), cdb(3);
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
  const auto px = ramp(3 * 5 * 4, 2.5f, 0.2f);
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
  std::vector<float> ay(3 * 3 * 2), ady = ramp(3 * 3 * 2, 0.3f, 0.4f);
  kernels::adaptive_avg_pool2d(as, px.data(), ay.data());
  kernels::adaptive_avg_pool2d_backward(as, ady.data(), pdx.data());
  kernels::adaptive_max_pool2d(as, px.data(), ay.data(), argmax.data());
  const auto gx = ramp(2 * 4 * 3, 1.7f, 0.6f), gw = ramp(4, 0.5f, 1.3f), gb = ramp(4, 0.2f, 2.1f);
  std::vector<float> gy(gx.size()), gmean(8), grstd(8), gdx(gx.size()), gdw(4), gdb(4);
  kernels::group_norm(2, 4, 3, 2, gx.data(), gw.data(), gb.data(), 1e-5f, gy.data(), gmean.data(),
                      grstd.data());
  kernels::group_norm_backward(2, 4, 3, 2, gx.data(), gw.data(), gmean.data(), grstd.data(),
                               gy.data(), gdx.data(), gdw.data(), gdb.data());
  kernels::group_norm(2, 4, 3, 4, gx.data(), nullptr, nullptr, 1e-5f, gy.data(), gmean.data(),
                      grstd.data());
  const auto ba = ramp(2 * 3 * 4, 0.9f, 0.1f), bb = ramp(2 * 4 * 5, 1.1f, 0.8f),
             bc = ramp(2 * 3 * 5, 0.4f, 1.9f);
  std::vector<float> bmm_y(bc.size()), bda(ba.size()), bdb(bb.size()), bdc(bc.size());
  kernels::baddbmm(2, 3, 5, 4, ba.data(), bb.data(), bc.data(), 0.125f, 0.5f, bmm_y.data());
  kernels::baddbmm(2, 3, 5, 4, ba.data(), bb.data(), nullptr, 1.0f, 1.0f, bmm_y.data());
  kernels::baddbmm_backward(2, 3, 5, 4, ba.data(), bb.data(), bc.data(), 0.125f, 0.5f, bda.data(),
                            bdb.data(), bdc.data());
  // An LSTM layer forwards (biases, a final state's gradient) and a GRU layer in reverse (none).
  for (const kernels::Cell cell : {kernels::Cell::kLstm, kernels::Cell::kGru}) {
    const bool lstm = cell == kernels::Cell::kLstm;
    kernels::RnnShape rs{cell, 3, 2, 4, 3, !lstm};
    const std::int64_t G = rs.gate_rows(), state = rs.batch * rs.hidden;
    const auto rx = ramp(3 * 2 * 4, 0.8f, 0.5f), h0 = ramp(6, 0.3f, 1.2f), c0 = ramp(6, 0.4f, 2.2f);
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
  // The further losses (one row ignored), and every reduction over two of three dimensions.
  const auto logits = ramp(4 * 5, 2.0f, 0.4f), probs = ramp(4 * 5, 0.5f, 1.3f);
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

// A handful of kernel calls of every shape of operand the trace knows: strided and batched
// products, in-place updates, optional operands, ids, a grouped convolution.
void run_kernels() {
  const auto x = ramp(6 * 8, 1.5f);
  const auto w = ramp(8 * 5, 0.5f, 1.0f);
  std::vector<float> y(6 * 5), yt(5 * 6);
  kernels::gemm(6, 5, 8, {x.data(), 8, 1}, {w.data(), 1, 8}, y.data(), 5);          // x · wᵀ
  kernels::gemm(5, 6, 8, {w.data(), 1, 5}, {x.data(), 1, 8}, yt.data(), 6, false);  // strided
  const auto bias = ramp(5, 0.1f, 2.0f);
  kernels::add_bias(6, 5, y.data(), bias.data());
  std::vector<float> g(y.size()), dg(y.size());
  kernels::gelu(static_cast<std::int64_t>(y.size()), y.data(), g.data());
  kernels::gelu_backward(static_cast<std::int64_t>(y.size()), y.data(), g.data(), dg.data());
  std::vector<float> sm(4 * 4 * 2), dsm(sm.size());
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
  std::vector<float> emb(4 * 5);
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
  const auto cx = ramp(2 * 4 * 25, 1.0f), cw = ramp(2 * 2 * 9, 0.3f, 0.5f);
  std::vector<float> cy(2 * 2 * 25);
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

// Every way of hashing gives each operand its own SHA-256: repeats known by value, kept copies
// taken when added (the caller may overwrite its buffer at once), with or without the helper
// thread, and past the memo's budget.
TEST(OperandDigests, EachTicketIsItsBytesSha256) {
  std::vector<Bytes> operands;
  for (std::size_t n : {0, 1, 7, 4096, 100000}) {
    Bytes b(n);
    for (std::size_t i = 0; i < n; ++i) b[i] = static_cast<std::uint8_t>(i * 31 + n);
    operands.push_back(b);
    operands.push_back(b);  // a repeat
    if (n > 0) {
      b[n / 2] ^= 1;  // the same length and key-sized prefix, one bit apart
      operands.push_back(b);
    }
  }
  for (const bool background : {false, true}) {
    for (const std::size_t memo : {std::size_t{0}, std::size_t{5000}, std::size_t{1} << 30}) {
      OperandDigests digests(memo, background);
      std::vector<OperandDigests::Ticket> tickets;
      for (const Bytes& b : operands) {
        Bytes scratch = b;
        tickets.push_back(digests.add(scratch));
        std::fill(scratch.begin(), scratch.end(), std::uint8_t{0xee});  // overwritten at once
      }
      digests.finish();
      for (std::size_t i = 0; i < operands.size(); ++i)
        EXPECT_EQ(digests.digest(tickets[i]), sha256(operands[i]))
            << "operand " << i << ", memo " << memo << ", background " << background;
      const std::size_t total =
          std::accumulate(operands.begin(), operands.end(), std::size_t{0},
                          [](std::size_t sum, const Bytes& b) { return sum + b.size(); });
      EXPECT_EQ(digests.hashed_bytes() + digests.repeated_bytes(), total);
      if (memo > total) {
        EXPECT_EQ(digests.repeated_bytes(), 1 + 7 + 4096 + 100000);
      } else if (memo == 0) {
        EXPECT_EQ(digests.repeated_bytes(), 0u);
      }
    }
  }
}

TEST(StepTrace, RecordsNothingWithoutASink) {
  TraceRecorder recorder;
  run_kernels();  // not installed
  EXPECT_TRUE(recorder.calls().empty());
  EXPECT_FALSE(kernels::trace::active());
}

TEST(StepTrace, RecordsOuterCallsOnlyInOrder) {
  TraceRecorder recorder;
  {
    ScopedSink on(&recorder);
    run_kernels();
  }
  std::vector<std::string> ops;
  for (const TracedCall& c : recorder.calls()) ops.push_back(c.op);
  // The grouped convolution's own products are part of its call, not calls of their own.
  EXPECT_EQ(ops, (std::vector<std::string>{"gemm",
                                           "gemm",
                                           "add_bias",
                                           "gelu",
                                           "gelu_backward",
                                           "softmax",
                                           "softmax_backward",
                                           "layer_norm",
                                           "cross_entropy",
                                           "cross_entropy_backward",
                                           "embedding",
                                           "dropout",
                                           "batch_norm_train",
                                           "conv",
                                           "conv_backward",
                                           "adam_update",
                                           "log_softmax",
                                           "log_softmax_backward",
                                           "relu",
                                           "relu_backward",
                                           "row_mean",
                                           "row_mean_backward",
                                           "mse",
                                           "mse_backward",
                                           "column_sums",
                                           "dropout_backward",
                                           "embedding_backward",
                                           "layer_norm",
                                           "layer_norm_backward",
                                           "batch_norm_train",
                                           "batch_norm_backward",
                                           "conv",
                                           "conv_backward",
                                           "sgd_update",
                                           "sgd_update",
                                           "sigmoid",
                                           "sigmoid_backward",
                                           "hardtanh",
                                           "hardtanh_backward",
                                           "softplus",
                                           "softplus_backward",
                                           "max_pool2d",
                                           "max_pool2d_backward",
                                           "avg_pool2d",
                                           "avg_pool2d_backward",
                                           "adaptive_avg_pool2d",
                                           "adaptive_avg_pool2d_backward",
                                           "adaptive_max_pool2d",
                                           "group_norm",
                                           "group_norm_backward",
                                           "group_norm",
                                           "baddbmm",
                                           "baddbmm",
                                           "baddbmm_backward",
                                           "rnn",
                                           "rnn_backward",
                                           "rnn",
                                           "rnn_backward",
                                           "nll_loss",
                                           "nll_loss_backward",
                                           "cross_entropy_smoothed",
                                           "cross_entropy_smoothed_backward",
                                           "bce_with_logits",
                                           "bce_with_logits_backward",
                                           "reduce",
                                           "reduce_backward",
                                           "reduce",
                                           "reduce_backward",
                                           "reduce",
                                           "reduce_backward",
                                           "reduce",
                                           "reduce_backward",
                                           "feature_dropout",
                                           "feature_dropout_backward",
                                           "bernoulli",
                                           "batch_norm_eval"}));
  // An absent operand is recorded as such; an in-place update has its inputs before the call.
  const TracedCall& ln = recorder.calls()[7];
  EXPECT_EQ(ln.inputs[2].name, "bias");
  EXPECT_EQ(ln.inputs[2].count, 0);
  const TracedCall& adam = recorder.calls()[15];
  EXPECT_NE(adam.inputs[0].sha256, adam.outputs[0].sha256);
}

TEST(StepTrace, EveryRecordedCallRecomputesToItsOwnOutputs) {
  CaptureAll all;
  {
    ScopedSink on(&all);
    run_kernels();
  }
  ASSERT_EQ(all.calls.size(), 76u);
  for (std::size_t i = 0; i < all.calls.size(); ++i) {
    SCOPED_TRACE(all.calls[i].op);
    auto out = recompute(all.calls[i], all.values[i].inputs);
    ASSERT_TRUE(out.ok()) << out.error().message;
    ASSERT_EQ(out->size(), all.values[i].outputs.size());
    for (std::size_t o = 0; o < out->size(); ++o)
      EXPECT_EQ((*out)[o].bytes, all.values[i].outputs[o].bytes) << (*out)[o].name;
    EXPECT_TRUE(check_values(*out, all.calls[i].outputs, "recomputed").ok());
  }
}

TEST(StepTrace, ProofsReachTheRootAndOnlyFromTheirOwnCall) {
  TraceRecorder recorder;
  {
    ScopedSink on(&recorder);
    run_kernels();
  }
  const auto& calls = recorder.calls();
  const Digest root = calls_root(calls);
  for (std::size_t i = 0; i < calls.size(); ++i) {
    const CallProof proof = prove_call(calls, static_cast<std::int64_t>(i));
    EXPECT_TRUE(verify_call(root, calls[i], proof)) << i;
    EXPECT_FALSE(verify_call(root, calls[(i + 1) % calls.size()], proof)) << i;
    CallProof moved = proof;
    moved.index = static_cast<std::int64_t>((i + 1) % calls.size());
    EXPECT_FALSE(verify_call(root, calls[i], moved)) << i;
  }
}

struct Signed {
  std::shared_ptr<const SigningKey> provider =
      std::make_shared<const SigningKey>(*SigningKey::generate());
  StepTrace trace;
  std::vector<CallValues> values;
  std::string text;
};

Signed signed_trace() {
  Signed s;
  CaptureAll all;
  {
    ScopedSink on(&all);
    run_kernels();
  }
  s.trace.calls = all.calls;
  s.values = all.values;
  s.trace.header = {sha256(std::string_view("task")), 3, 2,
                    static_cast<std::int64_t>(all.calls.size()), calls_root(all.calls)};
  s.text = write_signed_trace(s.trace, *s.provider);
  return s;
}

TEST(SignedTrace, ReadsBackAndRefusesEdits) {
  const Signed s = signed_trace();
  auto read = read_signed_trace(s.text, "trace.json");
  ASSERT_TRUE(read.ok()) << read.error().message;
  EXPECT_EQ(read->trace.calls, s.trace.calls);
  EXPECT_EQ(read->signer.raw(), s.provider->public_key().raw());

  // One output hash changed: the calls no longer hash to the signed root.
  auto doc = *parse_json(s.text, "t");
  std::string h = doc["calls"][3]["outputs"][0]["sha256"];
  h[0] = h[0] == 'a' ? 'b' : 'a';
  doc["calls"][3]["outputs"][0]["sha256"] = h;
  auto edited = read_signed_trace(canonical_json(doc), "trace.json");
  ASSERT_FALSE(edited.ok());
  EXPECT_EQ(edited.error().code, Errc::kRejected);
  EXPECT_NE(edited.error().message.find("do not hash to the signed calls_root"), std::string::npos);

  // The header changed: the signature fails.
  doc = *parse_json(s.text, "t");
  doc["header"]["step"] = 3;
  auto resigned = read_signed_trace(canonical_json(doc), "trace.json");
  ASSERT_FALSE(resigned.ok());
  EXPECT_NE(resigned.error().message.find("signature"), std::string::npos);

  // Malformed: a call out of order, a bad dtype: invalid input naming the place.
  doc = *parse_json(s.text, "t");
  doc["calls"][2]["index"] = 5;
  auto reordered = read_signed_trace(canonical_json(doc), "trace.json");
  ASSERT_FALSE(reordered.ok());
  EXPECT_NE(reordered.error().message.find("trace.json: calls[2]: index"), std::string::npos);
  doc = *parse_json(s.text, "t");
  doc["calls"][1]["inputs"][0]["dtype"] = "f16";
  auto dtype = read_signed_trace(canonical_json(doc), "trace.json");
  ASSERT_FALSE(dtype.ok());
  EXPECT_EQ(dtype.error().code, Errc::kInvalidInput);
}

OperatorEvidence evidence_for(const Signed& s, std::size_t call) {
  OperatorEvidence e;
  e.header = s.trace.header;
  e.provider = s.provider->public_key();
  e.provider_signature = s.provider->sign(as_bytes(canonical_json(header_to_json(e.header))));
  e.call = s.trace.calls[call];
  e.proof = prove_call(s.trace.calls, static_cast<std::int64_t>(call));
  e.inputs = s.values[call].inputs;
  e.outputs = s.values[call].outputs;
  e.place = "forward pass";
  return e;
}

TEST(Referee, RulesForAnHonestCallAndAgainstAChangedOne) {
  const Signed s = signed_trace();
  const SigningKey auditor = *SigningKey::generate();
  for (std::size_t i = 0; i < s.trace.calls.size(); ++i) {
    auto checked =
        read_operator_evidence(write_operator_evidence(evidence_for(s, i), auditor), "e");
    ASSERT_TRUE(checked.ok()) << checked.error().message;
    auto ruling = rule(checked->evidence);
    ASSERT_TRUE(ruling.ok()) << ruling.error().message;
    EXPECT_TRUE(ruling->provider_correct) << s.trace.calls[i].op << ": " << ruling->summary;
  }

  // A provider whose gelu output is one ulp off in one value, and which signed that output.
  Signed cheat = s;
  CallValues& gelu = cheat.values[3];
  ASSERT_EQ(cheat.trace.calls[3].op, "gelu");
  float* y = reinterpret_cast<float*>(gelu.outputs[0].bytes.data());
  y[7] = std::nextafter(y[7], INFINITY);
  cheat.trace.calls[3].outputs[0].sha256 = sha256(gelu.outputs[0].bytes);
  cheat.trace.header.calls_root = calls_root(cheat.trace.calls);
  auto checked =
      read_operator_evidence(write_operator_evidence(evidence_for(cheat, 3), auditor), "e");
  ASSERT_TRUE(checked.ok()) << checked.error().message;
  auto ruling = rule(checked->evidence);
  ASSERT_TRUE(ruling.ok());
  EXPECT_FALSE(ruling->provider_correct);
  EXPECT_EQ(ruling->differing_outputs, std::vector<std::string>{"y (1 of 30 values)"});
  ASSERT_EQ(ruling->examples.size(), 1u);
  EXPECT_EQ(ruling->examples[0].output, "y");
  EXPECT_EQ(ruling->examples[0].index, 7);
  EXPECT_EQ(static_cast<float>(ruling->examples[0].provider),
            std::nextafter(static_cast<float>(ruling->examples[0].documented), INFINITY));
  EXPECT_NE(ruling->summary.find("against the provider"), std::string::npos);
}

TEST(Referee, RefusesEvidenceThatDoesNotHold) {
  const Signed s = signed_trace();
  const SigningKey auditor = *SigningKey::generate();
  const std::string good = write_operator_evidence(evidence_for(s, 3), auditor);
  // The document is canonical JSON, as every signed document of ours.
  EXPECT_EQ(good, canonical_json(nlohmann::json::parse(good)) + "\n");
  auto expect_refused = [&](nlohmann::json doc, const SigningKey* resign, const std::string& says) {
    if (resign != nullptr) {
      doc["signature"] = hex_encode(resign->sign(as_bytes(canonical_json(doc["evidence"]))));
      doc["signer"] = hex_encode(resign->public_key().raw());
    }
    auto r = read_operator_evidence(canonical_json(doc), "evidence.json");
    ASSERT_FALSE(r.ok()) << says;
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  };
  const auto doc = *parse_json(good, "e");
  // Edited after the auditor signed.
  auto edited = doc;
  edited["evidence"]["place"] = "elsewhere";
  expect_refused(edited, nullptr, "auditor's signature");
  // Values that are not the ones the provider's trace hashes (re-signed by the auditor).
  auto values = doc;
  std::string text = values["evidence"]["inputs"][0]["base64"];
  text[0] = text[0] == 'A' ? 'B' : 'A';
  values["evidence"]["inputs"][0]["base64"] = text;
  expect_refused(values, &auditor, "not the ones the signed trace hashes");
  // A call that is not in the provider's signed trace.
  auto moved = doc;
  moved["evidence"]["call"]["params"][0]["int"] = 31;
  expect_refused(moved, &auditor, "is not in the provider's signed trace");
  // A header the provider did not sign.
  auto header = doc;
  header["evidence"]["header"]["epoch"] = 4;
  expect_refused(header, &auditor, "provider's signature");
}

// scripts/referee_ref.py, numpy written from docs/portable.md, on every call above: the same
// ruling as the kernels' (for the provider), and against the one-ulp gelu.
TEST(Referee, TheNumpyRefereeRulesAsTheKernelsDo) {
  Signed s = signed_trace();
  const SigningKey auditor = *SigningKey::generate();
  testing::ScratchDir dir;
  auto numpy = [&](const std::vector<std::size_t>& calls) {
    std::string files;
    for (const std::size_t i : calls) {
      const auto file = dir / ("evidence-" + std::to_string(i) + ".json");
      EXPECT_TRUE(
          write_file_atomic(file, write_operator_evidence(evidence_for(s, i), auditor)).ok());
      files += ' ';
      files += file.string();
    }
    return testing::run_command(
        "/usr/bin/python3 " + std::string(VT_SOURCE_DIR) + "/scripts/referee_ref.py" + files,
        dir.path());
  };
  // Every call in one run of the script (a ruling a line); grouped convolutions are not covered.
  std::vector<std::size_t> covered, grouped;
  for (std::size_t i = 0; i < s.trace.calls.size(); ++i) {
    const TracedCall& call = s.trace.calls[i];
    bool is_grouped = false;
    for (const TracedParam& p : call.params)
      is_grouped |= call.op.starts_with("conv") && p.name == "groups" && p.integer != 1;
    (is_grouped ? grouped : covered).push_back(i);
  }
  const auto all = numpy(covered);
  EXPECT_EQ(all.exit_code, 0) << all.out << all.err;
  std::istringstream lines(all.out);
  std::size_t n = 0;
  for (std::string line; std::getline(lines, line); ++n) {
    ASSERT_LT(n, covered.size());
    const TracedCall& call = s.trace.calls[covered[n]];
    std::string ruled = R"("ruling": "provider_correct", "operator": ")";
    ruled += call.op;
    EXPECT_NE(line.find(ruled + '"'), std::string::npos) << covered[n] << ": " << line;
  }
  EXPECT_EQ(n, covered.size()) << all.err;
  ASSERT_FALSE(grouped.empty());
  const auto not_covered = numpy(grouped);
  EXPECT_EQ(not_covered.exit_code, 3) << not_covered.out << not_covered.err;

  float* y = reinterpret_cast<float*>(s.values[3].outputs[0].bytes.data());
  y[7] = std::nextafter(y[7], INFINITY);
  s.trace.calls[3].outputs[0].sha256 = sha256(s.values[3].outputs[0].bytes);
  s.trace.header.calls_root = calls_root(s.trace.calls);
  const auto r = numpy({3});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("\"differing_outputs\": [\"y (1 of 30 values)\"]"), std::string::npos)
      << r.out;
}

// docs/dispute.md's table of recorded operators is the referee's list.
TEST(Referee, TheDocsListTheOperatorsItRecomputes) {
  const std::string doc = *read_text_file(std::string(VT_SOURCE_DIR) + "/docs/dispute.md");
  const std::size_t begin = doc.find("### Recorded operators");
  ASSERT_NE(begin, std::string::npos);
  const std::string table = doc.substr(begin, doc.find("\n### ", begin + 1) - begin);
  std::set<std::string> documented;
  const std::regex row("\n\\| `([a-z0-9_]+)` \\|");
  for (auto it = std::sregex_iterator(table.begin(), table.end(), row);
       it != std::sregex_iterator(); ++it)
    documented.insert((*it)[1]);
  const auto& names = refereed_operators();
  EXPECT_EQ(documented, std::set<std::string>(names.begin(), names.end()));
}

TEST(Recompute, RefusesOperandsThatDoNotFitTheParameters) {
  const Signed s = signed_trace();
  // gemm with k larger than its operands hold.
  TracedCall gemm = s.trace.calls[0];
  for (TracedParam& p : gemm.params)
    if (p.name == "k") p.integer = 9;
  auto r = recompute(gemm, s.values[0].inputs);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.error().code, Errc::kInvalidInput);
  EXPECT_NE(r.error().message.find("input a holds 48 values; the parameters call for 54"),
            std::string::npos)
      << r.error().message;
  // Sizes whose product would overflow before any allocation.
  for (TracedParam& p : gemm.params)
    if (p.name == "m" || p.name == "n" || p.name == "k") p.integer = std::int64_t{1} << 20;
  r = recompute(gemm, s.values[0].inputs);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("more than 2^28"), std::string::npos) << r.error().message;
  // An id outside the table.
  TracedCall emb = s.trace.calls[10];
  ASSERT_EQ(emb.op, "embedding");
  std::vector<OperandValues> inputs = s.values[10].inputs;
  reinterpret_cast<std::int64_t*>(inputs[0].bytes.data())[1] = 99;
  r = recompute(emb, inputs);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("ids[1] = 99 is outside [0, 4)"), std::string::npos)
      << r.error().message;
  // A reduction whose sizes claim more values than its input holds: refused before the shape's
  // tables of offsets are built; a max pool's argmax outside its plane; a target out of range.
  std::size_t first_reduce = 0, first_pool_backward = 0, first_nll = 0;
  for (std::size_t i = s.trace.calls.size(); i-- > 0;) {
    if (s.trace.calls[i].op == "reduce") first_reduce = i;
    if (s.trace.calls[i].op == "max_pool2d_backward") first_pool_backward = i;
    if (s.trace.calls[i].op == "nll_loss") first_nll = i;
  }
  TracedCall reduce = s.trace.calls[first_reduce];
  for (TracedParam& p : reduce.params)
    if (p.name == "size_0") p.integer = std::int64_t{1} << 20;
  r = recompute(reduce, s.values[first_reduce].inputs);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("input x holds 24 values; the parameters call for"),
            std::string::npos)
      << r.error().message;
  inputs = s.values[first_pool_backward].inputs;
  reinterpret_cast<std::int64_t*>(inputs[0].bytes.data())[2] = 20;  // the plane holds 5 × 4
  r = recompute(s.trace.calls[first_pool_backward], inputs);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("argmax[2] = 20 is outside [-1, 20)"), std::string::npos)
      << r.error().message;
  inputs = s.values[first_nll].inputs;
  reinterpret_cast<std::int64_t*>(inputs[1].bytes.data())[0] = 5;
  r = recompute(s.trace.calls[first_nll], inputs);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("targets[0] = 5 is outside [0, 5)"), std::string::npos)
      << r.error().message;
  // An operator the referee does not know.
  TracedCall other = gemm;
  other.op = "fft";
  r = recompute(other, s.values[0].inputs);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.error().message.find("does not recompute it"), std::string::npos);
}

TEST(Departure, FindsTheFirstCallWithSameInputsAndOtherOutputs) {
  const Signed s = signed_trace();
  StepTrace provider = s.trace;
  EXPECT_FALSE(first_departure(s.trace, provider).has_value());
  provider.calls[5].outputs[0].sha256[0] ^= 1;
  provider.calls[6].inputs[0].sha256[0] ^= 1;  // what follows from it differs too
  auto d = first_departure(s.trace, provider);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, Departure::Kind::kOperator);
  EXPECT_EQ(d->call, 5);

  provider = s.trace;
  provider.calls[4].inputs[1].sha256[0] ^= 1;
  d = first_departure(s.trace, provider);
  ASSERT_TRUE(d.has_value());
  EXPECT_EQ(d->kind, Departure::Kind::kUntraced);
  EXPECT_EQ(d->call, 4);

  provider = s.trace;
  provider.calls[2].params[0].integer += 1;
  EXPECT_EQ(first_departure(s.trace, provider)->kind, Departure::Kind::kStructure);
  provider = s.trace;
  provider.calls.pop_back();
  EXPECT_EQ(first_departure(s.trace, provider)->kind, Departure::Kind::kLength);
}

}  // namespace
}  // namespace vt::dispute
