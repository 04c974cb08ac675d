// Runs one portable kernel on inputs from files, for tests/kernels/ops_ref_test.py, which checks
// the outputs against reference/portable_ops_ref.py (numpy, written from docs/portable.md alone).
//
//   kernel_probe DIR
//
// DIR/spec.json: {"op": NAME, "params": {...}, "inputs": {NAME: {"dtype": "f32"|"i64",
// "shape": [...]}}}, each input's raw little-endian bytes in DIR/<input>.bin. Writes each output
// to DIR/out/<name>.bin and DIR/out.json: {"outputs": {NAME: {"dtype": "f32", "shape": [...]}}}.
// The ops and their inputs and outputs are listed in ops_ref_test.py.
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/activation.h"
#include "kernels/conv.h"
#include "kernels/loss.h"
#include "kernels/norm.h"
#include "kernels/parallel.h"
#include "kernels/pointwise.h"
#include "kernels/pool.h"
#include "kernels/products.h"
#include "kernels/reduce.h"
#include "kernels/rnn.h"
#include "kernels/softmax.h"
#include "kernels/upsample.h"

namespace {

namespace fs = std::filesystem;
namespace k = vt::kernels;
using Shape = std::vector<std::int64_t>;
using json = nlohmann::json;

std::int64_t numel(const Shape& s) {
  std::int64_t n = 1;
  for (const std::int64_t d : s) n *= d;
  return n;
}

struct Tensor {
  Shape shape;
  std::vector<float> f;
  std::vector<std::int64_t> i;
  float* data() { return f.data(); }
  std::int64_t size(std::size_t d) const { return shape.at(d); }
};

class Probe {
 public:
  explicit Probe(fs::path dir) : dir_(std::move(dir)) {
    std::ifstream in(dir_ / "spec.json");
    spec_ = json::parse(in);
    params_ = spec_.value("params", json::object());
    for (const auto& [name, info] : spec_["inputs"].items()) {
      Tensor t;
      t.shape = info["shape"].get<Shape>();
      std::ifstream bin(dir_ / (name + ".bin"), std::ios::binary);
      if (info["dtype"] == "i64") {
        t.i.resize(static_cast<std::size_t>(numel(t.shape)));
        bin.read(reinterpret_cast<char*>(t.i.data()), static_cast<std::streamsize>(t.i.size() * 8));
      } else {
        t.f.resize(static_cast<std::size_t>(numel(t.shape)));
        bin.read(reinterpret_cast<char*>(t.f.data()), static_cast<std::streamsize>(t.f.size() * 4));
      }
      if (!bin) throw std::runtime_error("input " + name + ": short file");
      inputs_[name] = std::move(t);
    }
  }

  std::string op() const { return spec_["op"]; }
  bool has(const std::string& name) const { return inputs_.count(name) > 0; }
  Tensor& in(const std::string& name) {
    auto it = inputs_.find(name);
    if (it == inputs_.end()) throw std::runtime_error("missing input " + name);
    return it->second;
  }
  float* in_or_null(const std::string& name) { return has(name) ? in(name).data() : nullptr; }
  float fparam(const std::string& name, float fallback) const {
    return params_.contains(name) ? params_[name].get<float>() : fallback;
  }
  std::int64_t iparam(const std::string& name, std::int64_t fallback) const {
    return params_.contains(name) ? params_[name].get<std::int64_t>() : fallback;
  }
  bool bparam(const std::string& name) const { return params_.value(name, false); }
  std::vector<double> dvparam(const std::string& name) const {
    return params_.at(name).get<std::vector<double>>();
  }
  Shape sparam(const std::string& name, const Shape& fallback) const {
    return params_.contains(name) ? params_[name].get<Shape>() : fallback;
  }
  std::uint64_t state() const { return std::stoull(params_.at("state").get<std::string>()); }
  const json& params() const { return params_; }

  float* out(const std::string& name, Shape shape) {
    Tensor& t = outputs_[name];
    t.shape = std::move(shape);
    t.f.assign(static_cast<std::size_t>(numel(t.shape)), 0.0f);
    return t.f.data();
  }
  void write() {
    fs::create_directories(dir_ / "out");
    json listing = json::object();
    for (auto& [name, t] : outputs_) {
      std::ofstream bin(dir_ / "out" / (name + ".bin"), std::ios::binary);
      bin.write(reinterpret_cast<const char*>(t.f.data()),
                static_cast<std::streamsize>(t.f.size() * 4));
      listing[name] = {{"dtype", "f32"}, {"shape", t.shape}};
    }
    std::ofstream(dir_ / "out.json") << json{{"outputs", listing}}.dump();
  }

 private:
  fs::path dir_;
  json spec_, params_;
  std::map<std::string, Tensor> inputs_, outputs_;
};

k::Activation activation_named(const std::string& fn) {
  for (const k::Activation f : k::kActivations) {
    if (k::activation_name(f) == fn) return f;
  }
  throw std::invalid_argument("kernel_probe: no activation " + fn);
}

void act(Probe& p) {
  const k::Activation f = activation_named(p.params().at("fn"));
  k::ActivationParams a;
  a.min_val = p.fparam("min_val", a.min_val);
  a.max_val = p.fparam("max_val", a.max_val);
  a.slope = p.fparam("slope", a.slope);
  a.alpha = p.fparam("alpha", a.alpha);
  a.beta = p.fparam("beta", a.beta);
  a.threshold = p.fparam("threshold", a.threshold);
  Tensor& x = p.in("x");
  const std::int64_t n = numel(x.shape);
  float* y = p.out("y", x.shape);
  k::activation(f, a, n, x.data(), y);
  k::activation_backward(f, a, n, x.data(), y, p.in("dy").data(), p.out("dx", x.shape));
}

k::PoolShape pool_shape(Probe& p, const Tensor& x, const Tensor& dy) {
  k::PoolShape s;
  s.planes = x.size(0) * x.size(1);
  s.in_h = x.size(2), s.in_w = x.size(3);
  s.out_h = dy.size(2), s.out_w = dy.size(3);
  const Shape kernel = p.sparam("kernel", {1, 1}), stride = p.sparam("stride", kernel);
  const Shape pad = p.sparam("padding", {0, 0}), dil = p.sparam("dilation", {1, 1});
  s.kernel_h = kernel[0], s.kernel_w = kernel[1];
  s.stride_h = stride[0], s.stride_w = stride[1];
  s.pad_h = pad[0], s.pad_w = pad[1];
  s.dilation_h = dil[0], s.dilation_w = dil[1];
  return s;
}

void upsample(Probe& p) {
  Tensor& x = p.in("x");
  Tensor& dy = p.in("dy");
  k::PoolShape s;
  s.planes = x.shape[0] * x.shape[1];
  s.in_h = x.shape[2], s.in_w = x.shape[3];
  s.out_h = dy.shape[2], s.out_w = dy.shape[3];
  const bool align = p.bparam("align_corners");
  const std::vector<double> factor = p.dvparam("scale_factor");
  const k::BilinearOptions o{align, k::upsample_scale(s.in_h, s.out_h, align, factor.at(0)),
                             k::upsample_scale(s.in_w, s.out_w, align, factor.at(1))};
  k::upsample_bilinear2d(s, o, x.data(), p.out("y", dy.shape));
  k::upsample_bilinear2d_backward(s, o, dy.data(), p.out("dx", x.shape));
}

void upsample_nearest(Probe& p) {
  Tensor& x = p.in("x");
  Tensor& dy = p.in("dy");
  const std::vector<double> factor = p.dvparam("scale_factor");
  const std::size_t spatial = x.shape.size() - 2;
  k::NearestShape s;
  s.planes = x.shape[0] * x.shape[1];
  for (std::size_t d = 0; d < spatial; ++d) {
    const std::size_t at = 3 - spatial + d;
    s.in[at] = x.shape[2 + d];
    s.out[at] = dy.shape[2 + d];
    s.scale[at] = k::upsample_scale(s.in[at], s.out[at], false, factor.at(d));
  }
  k::upsample_nearest(s, x.data(), p.out("y", dy.shape));
  k::upsample_nearest_backward(s, dy.data(), p.out("dx", x.shape));
}

void pool(Probe& p, const std::string& op) {
  Tensor& x = p.in("x");
  Tensor& dy = p.in("dy");
  const k::PoolShape s = pool_shape(p, x, dy);
  float* y = p.out("y", dy.shape);
  float* dx = p.out("dx", x.shape);
  std::vector<std::int64_t> argmax(static_cast<std::size_t>(numel(dy.shape)));
  if (op == "max_pool2d") {
    k::max_pool2d(s, x.data(), y, argmax.data());
    k::max_pool2d_backward(s, argmax.data(), dy.data(), dx);
  } else if (op == "adaptive_max_pool2d") {
    k::adaptive_max_pool2d(s, x.data(), y, argmax.data());
    k::max_pool2d_backward(s, argmax.data(), dy.data(), dx);
  } else if (op == "avg_pool2d") {
    k::AvgPoolOptions o;
    o.count_include_pad = p.bparam("count_include_pad");
    o.divisor_override = p.iparam("divisor_override", 0);
    k::avg_pool2d(s, o, x.data(), y);
    k::avg_pool2d_backward(s, o, dy.data(), dx);
  } else {
    k::adaptive_avg_pool2d(s, x.data(), y);
    k::adaptive_avg_pool2d_backward(s, dy.data(), dx);
  }
}

// The convolution a conv or conv_transpose op describes: for a transposed one, the convolution
// whose dx it is (its input is that convolution's output).
k::ConvShape conv_shape(Probe& p, const Shape& conv_in, const Shape& w, std::int64_t groups,
                        bool transposed) {
  k::ConvShape s;
  const Shape stride = p.sparam("stride", {1, 1, 1}), pad = p.sparam("padding", {0, 0, 0}),
              dil = p.sparam("dilation", {1, 1, 1});
  s.batch = conv_in[0];
  s.in_channels = conv_in[1];
  s.out_channels = w[0];
  if (transposed) s.in_channels = w[1] * groups;
  for (int d = 0; d < 3; ++d) {
    s.in[d] = conv_in[2 + static_cast<std::size_t>(d)];
    s.kernel[d] = w[2 + static_cast<std::size_t>(d)];
    s.stride[d] = stride[static_cast<std::size_t>(d)];
    s.padding[d] = pad[static_cast<std::size_t>(d)];
    s.dilation[d] = dil[static_cast<std::size_t>(d)];
  }
  return s;
}

void conv(Probe& p) {
  Tensor& x = p.in("x");
  Tensor& w = p.in("w");
  Tensor& dy = p.in("dy");
  const std::int64_t groups = p.iparam("groups", 1);
  const k::ConvShape s = conv_shape(p, x.shape, w.shape, groups, false);
  float* bias = p.in_or_null("bias");
  k::grouped_conv_forward(s, groups, x.data(), w.data(), bias, p.out("y", dy.shape));
  k::grouped_conv_backward(s, groups, x.data(), w.data(), dy.data(), p.out("dx", x.shape),
                           p.out("dw", w.shape),
                           bias != nullptr ? p.out("dbias", {w.shape[0]}) : nullptr);
}

void conv_transpose(Probe& p) {
  Tensor& x = p.in("x");
  Tensor& w = p.in("w");
  Tensor& dy = p.in("dy");
  const std::int64_t groups = p.iparam("groups", 1);
  // The convolution's input is the transposed output (dy's shape).
  const k::ConvShape s = conv_shape(p, dy.shape, w.shape, groups, true);
  float* bias = p.in_or_null("bias");
  k::conv_transpose_forward(s, groups, x.data(), w.data(), bias, p.out("y", dy.shape));
  k::conv_transpose_backward(s, groups, x.data(), w.data(), dy.data(), p.out("dx", x.shape),
                             p.out("dw", w.shape),
                             bias != nullptr ? p.out("dbias", {dy.shape[1]}) : nullptr);
}

void bmm(Probe& p) {
  Tensor& a = p.in("a");
  Tensor& b = p.in("b");
  Tensor& dy = p.in("dy");
  const std::int64_t n = a.size(0), m = a.size(1), kk = a.size(2), cols = b.size(2);
  const float alpha = p.fparam("alpha", 1.0f), beta = p.fparam("beta", 1.0f);
  float* c = p.in_or_null("c");
  k::baddbmm(n, m, cols, kk, a.data(), b.data(), c, alpha, beta, p.out("y", dy.shape));
  k::baddbmm_backward(n, m, cols, kk, a.data(), b.data(), dy.data(), alpha, beta,
                      p.out("da", a.shape), p.out("db", b.shape),
                      c != nullptr ? p.out("dc", dy.shape) : nullptr);
}

void reduce(Probe& p) {
  static const std::map<std::string, k::Reduction> kNames = {
      {"sum", k::Reduction::kSum},
      {"mean", k::Reduction::kMean},
      {"amax", k::Reduction::kAmax},
      {"logsumexp", k::Reduction::kLogsumexp}};
  const k::Reduction r = kNames.at(p.params().at("fn"));
  Tensor& x = p.in("x");
  Tensor& dy = p.in("dy");
  std::vector<bool> reduced(x.shape.size(), false);
  for (std::int64_t d : p.sparam("dims", {})) {
    if (d < 0) d += static_cast<std::int64_t>(x.shape.size());
    reduced[static_cast<std::size_t>(d)] = true;
  }
  const k::ReduceShape s(x.shape, reduced);
  float* y = p.out("y", dy.shape);
  k::reduce(r, s, x.data(), y);
  k::reduce_backward(r, s, x.data(), y, dy.data(), p.out("dx", x.shape));
}

// x with dimension `dim` moved last (a copy), and back.
std::vector<float> move_last(const Tensor& x, std::size_t dim, bool back, const Shape& shape) {
  std::int64_t outer = 1, inner = 1;
  for (std::size_t d = 0; d < dim; ++d) outer *= shape[d];
  for (std::size_t d = dim + 1; d < shape.size(); ++d) inner *= shape[d];
  const std::int64_t n = shape[dim];
  std::vector<float> out(x.f.size());
  for (std::int64_t o = 0; o < outer; ++o) {
    for (std::int64_t j = 0; j < n; ++j) {
      for (std::int64_t i = 0; i < inner; ++i) {
        const std::int64_t natural = (o * n + j) * inner + i, last = (o * inner + i) * n + j;
        if (back) {
          out[static_cast<std::size_t>(natural)] = x.f[static_cast<std::size_t>(last)];
        } else {
          out[static_cast<std::size_t>(last)] = x.f[static_cast<std::size_t>(natural)];
        }
      }
    }
  }
  return out;
}

void softmaxes(Probe& p, bool log) {
  Tensor& x = p.in("x");
  Tensor& dy = p.in("dy");
  std::int64_t dim = p.iparam("dim", -1);
  if (dim < 0) dim += static_cast<std::int64_t>(x.shape.size());
  const std::size_t d = static_cast<std::size_t>(dim);
  const std::int64_t width = x.shape[d], rows = numel(x.shape) / width;
  Tensor xl{x.shape, move_last(x, d, false, x.shape), {}};
  Tensor gl{x.shape, move_last(dy, d, false, x.shape), {}};
  Tensor yl{x.shape, std::vector<float>(xl.f.size()), {}}, dl = yl;
  if (log) {
    k::log_softmax(rows, width, xl.data(), yl.data());
    k::log_softmax_backward(rows, width, yl.data(), gl.data(), dl.data());
  } else {
    k::softmax(rows, width, xl.data(), 1.0f, false, yl.data());
    k::softmax_backward(rows, width, yl.data(), gl.data(), 1.0f, false, dl.data());
  }
  const std::vector<float> y = move_last(yl, d, true, x.shape),
                           dx = move_last(dl, d, true, x.shape);
  std::memcpy(p.out("y", x.shape), y.data(), y.size() * 4);
  std::memcpy(p.out("dx", x.shape), dx.data(), dx.size() * 4);
}

void group_norm(Probe& p) {
  Tensor& x = p.in("x");
  const std::int64_t b = x.size(0), c = x.size(1), s = numel(x.shape) / (b * c);
  const std::int64_t groups = p.iparam("groups", 1);
  std::vector<float> mean(static_cast<std::size_t>(b * groups)), rstd(mean.size());
  k::group_norm(b, c, s, groups, x.data(), p.in("w").data(), p.in("b").data(),
                p.fparam("eps", 1e-5f), p.out("y", x.shape), mean.data(), rstd.data());
  k::group_norm_backward(b, c, s, groups, x.data(), p.in("w").data(), mean.data(), rstd.data(),
                         p.in("dy").data(), p.out("dx", x.shape), p.out("dw", {c}),
                         p.out("db", {c}));
}

void losses(Probe& p, const std::string& op) {
  const float g = p.fparam("g", 1.0f);
  if (op == "nll_loss") {
    Tensor& logp = p.in("logp");
    Tensor& t = p.in("target");
    const std::int64_t ignore = p.iparam("ignore_index", -100);
    *p.out("loss", {}) = k::nll_loss(logp.size(0), logp.size(1), logp.data(), t.i.data(), ignore);
    k::nll_loss_backward(logp.size(0), logp.size(1), t.i.data(), ignore, g,
                         p.out("dlogp", logp.shape));
  } else if (op == "cross_entropy") {
    Tensor& x = p.in("logits");
    Tensor& t = p.in("target");
    const float eps = p.fparam("smoothing", 0.0f);
    const std::int64_t rows = x.size(0), classes = x.size(1);
    std::vector<float> mx(static_cast<std::size_t>(rows)), sm(mx.size());
    float* loss = p.out("loss", {});
    float* d = p.out("dlogits", x.shape);
    if (eps == 0.0f) {
      *loss = k::cross_entropy(rows, classes, x.data(), t.i.data(), mx.data(), sm.data());
      k::cross_entropy_backward(rows, classes, x.data(), t.i.data(), mx.data(), sm.data(), g, d);
    } else {
      *loss =
          k::cross_entropy_smoothed(rows, classes, x.data(), t.i.data(), eps, mx.data(), sm.data());
      k::cross_entropy_smoothed_backward(rows, classes, x.data(), t.i.data(), eps, mx.data(),
                                         sm.data(), g, d);
    }
  } else {
    Tensor& x = p.in("x");
    Tensor& t = p.in("target");
    const std::int64_t n = numel(x.shape);
    *p.out("loss", {}) = k::bce_with_logits(n, x.data(), t.data());
    k::bce_with_logits_backward(n, x.data(), t.data(), g, p.out("dx", x.shape));
  }
}

// A stack of layers and directions, each kernels::rnn_* on its own: a layer's input is the
// previous layer's output (directions side by side), and its gradient the sum of both
// directions' (the reverse one added to the forward one).
void rnn(Probe& p, k::Cell cell) {
  Tensor& x = p.in("x");
  const std::int64_t layers = p.iparam("layers", 1), hidden = p.iparam("hidden", 1);
  // An LSTM's proj_size: h (and y) `out` wide, c `hidden` wide.
  const std::int64_t proj = p.iparam("proj", 0), out = proj > 0 ? proj : hidden;
  const std::int64_t dirs = p.bparam("bidirectional") ? 2 : 1;
  const std::int64_t T = x.size(0), B = x.size(1), BH = B * hidden, BW = B * out;
  const bool lstm = cell == k::Cell::kLstm;
  struct Run {
    k::RnnShape s;
    std::string suffix;
    std::vector<float> in, y, saved;
  };
  std::vector<Run> runs;
  std::vector<float> layer_in = x.f;
  std::int64_t width = x.size(2);
  float* hn = p.out("hn", {layers * dirs, B, out});
  float* cn = lstm ? p.out("cn", {layers * dirs, B, hidden}) : nullptr;
  for (std::int64_t l = 0; l < layers; ++l) {
    std::vector<float> next(static_cast<std::size_t>(T * B * dirs * out));
    for (std::int64_t dir = 0; dir < dirs; ++dir) {
      Run r;
      r.s = {cell, T, B, width, hidden, dir == 1, proj};
      r.suffix = "_l" + std::to_string(l) + (dir == 1 ? "_reverse" : "");
      r.in = layer_in;
      r.y.resize(static_cast<std::size_t>(T * BW));
      r.saved.resize(static_cast<std::size_t>(r.s.saved_floats()));
      const std::int64_t row = l * dirs + dir;
      const float* w_hr = proj > 0 ? p.in("w_hr" + r.suffix).data() : nullptr;
      k::rnn_forward(r.s, r.in.data(), p.in("h0").data() + row * BW,
                     lstm ? p.in("c0").data() + row * BH : nullptr, p.in("w_ih" + r.suffix).data(),
                     p.in("w_hh" + r.suffix).data(), p.in_or_null("b_ih" + r.suffix),
                     p.in_or_null("b_hh" + r.suffix), r.y.data(), hn + row * BW,
                     lstm ? cn + row * BH : nullptr, r.saved.data(), w_hr);
      for (std::int64_t tb = 0; tb < T * B; ++tb) {
        std::copy(r.y.begin() + tb * out, r.y.begin() + (tb + 1) * out,
                  next.begin() + (tb * dirs + dir) * out);
      }
      runs.push_back(std::move(r));
    }
    layer_in = std::move(next);
    width = dirs * out;
  }
  std::memcpy(p.out("y", {T, B, dirs * out}), layer_in.data(), layer_in.size() * 4);
  // Backward, last layer first.
  std::vector<float> upstream = p.in("dy").f;
  float* dh0 = p.out("dh0", {layers * dirs, B, out});
  float* dc0 = lstm ? p.out("dc0", {layers * dirs, B, hidden}) : nullptr;
  for (std::int64_t l = layers - 1; l >= 0; --l) {
    std::vector<float> dx_sum;
    for (std::int64_t dir = 0; dir < dirs; ++dir) {
      Run& r = runs[static_cast<std::size_t>(l * dirs + dir)];
      std::vector<float> dy(static_cast<std::size_t>(T * BW));
      for (std::int64_t tb = 0; tb < T * B; ++tb) {
        std::copy(upstream.begin() + (tb * dirs + dir) * out,
                  upstream.begin() + (tb * dirs + dir + 1) * out, dy.begin() + tb * out);
      }
      const std::int64_t row = l * dirs + dir;
      std::vector<float> dx(r.in.size());
      const Shape wi = p.in("w_ih" + r.suffix).shape, wh = p.in("w_hh" + r.suffix).shape;
      const bool bias = p.has("b_ih" + r.suffix);
      k::rnn_backward(
          r.s, r.in.data(), p.in("h0").data() + row * BW,
          lstm ? p.in("c0").data() + row * BH : nullptr, p.in("w_ih" + r.suffix).data(),
          p.in("w_hh" + r.suffix).data(), r.y.data(), r.saved.data(), dy.data(),
          p.in("dhn").data() + row * BW, lstm ? p.in("dcn").data() + row * BH : nullptr, dx.data(),
          dh0 + row * BW, lstm ? dc0 + row * BH : nullptr, p.out("dw_ih" + r.suffix, wi),
          p.out("dw_hh" + r.suffix, wh), bias ? p.out("db_ih" + r.suffix, {wi[0]}) : nullptr,
          bias ? p.out("db_hh" + r.suffix, {wh[0]}) : nullptr,
          proj > 0 ? p.in("w_hr" + r.suffix).data() : nullptr,
          proj > 0 ? p.out("dw_hr" + r.suffix, p.in("w_hr" + r.suffix).shape) : nullptr);
      if (dx_sum.empty()) {
        dx_sum = std::move(dx);
      } else {
        for (std::size_t i = 0; i < dx_sum.size(); ++i) dx_sum[i] = dx_sum[i] + dx[i];
      }
    }
    upstream = std::move(dx_sum);
  }
  std::memcpy(p.out("dx", x.shape), upstream.data(), upstream.size() * 4);
}

void random_ops(Probe& p, const std::string& op) {
  Tensor& x = p.in("x");
  const float prob = p.fparam("p", 0.5f);
  const std::uint64_t call = static_cast<std::uint64_t>(p.iparam("call", 0));
  if (op == "bernoulli") {
    k::bernoulli(numel(x.shape), prob, p.state(), call, p.out("y", x.shape));
    return;
  }
  if (op == "uniform") {
    k::uniform(numel(x.shape), p.state(), call, p.out("y", x.shape));
    return;
  }
  if (op == "bernoulli_of") {
    k::bernoulli_of(numel(x.shape), x.data(), p.state(), call, p.out("y", x.shape));
    return;
  }
  if (op == "normal") {
    k::normal(numel(x.shape), p.state(), call, p.out("y", x.shape));
    return;
  }
  const std::int64_t b = x.size(0), c = x.size(1), s = numel(x.shape) / (b * c);
  k::feature_dropout(b, c, s, x.data(), prob, p.state(), call, p.out("y", x.shape));
  k::feature_dropout_backward(b, c, s, p.in("dy").data(), prob, p.state(), call,
                              p.out("dx", x.shape));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: kernel_probe DIR\n";
    return 2;
  }
  try {
    k::ieee_mode();
    Probe p(argv[1]);
    const std::string op = p.op();
    if (op == "act") {
      act(p);
    } else if (op == "max_pool2d" || op == "avg_pool2d" || op == "adaptive_avg_pool2d" ||
               op == "adaptive_max_pool2d") {
      pool(p, op);
    } else if (op == "upsample_bilinear2d") {
      upsample(p);
    } else if (op == "upsample_nearest") {
      upsample_nearest(p);
    } else if (op == "conv") {
      conv(p);
    } else if (op == "conv_transpose") {
      conv_transpose(p);
    } else if (op == "bmm") {
      bmm(p);
    } else if (op == "reduce") {
      reduce(p);
    } else if (op == "softmax" || op == "log_softmax") {
      softmaxes(p, op == "log_softmax");
    } else if (op == "group_norm") {
      group_norm(p);
    } else if (op == "nll_loss" || op == "cross_entropy" || op == "bce_logits") {
      losses(p, op);
    } else if (op == "lstm" || op == "gru" || op == "rnn_tanh" || op == "rnn_relu") {
      rnn(p, op == "lstm"       ? k::Cell::kLstm
             : op == "gru"      ? k::Cell::kGru
             : op == "rnn_tanh" ? k::Cell::kTanh
                                : k::Cell::kRelu);
    } else if (op == "feature_dropout" || op == "bernoulli" || op == "bernoulli_of" ||
               op == "uniform" || op == "normal") {
      random_ops(p, op);
    } else {
      std::cerr << "kernel_probe: unknown op " << op << "\n";
      return 2;
    }
    p.write();
  } catch (const std::exception& e) {
    std::cerr << "kernel_probe: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
