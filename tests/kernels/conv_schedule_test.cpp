// Every convolution path (kernels/conv_paths.h: the grid, the batched column matrices, the
// depthwise chains) against conv.h's definitions written out one value at a time, with groups:
// equal bits at the shapes of real CNNs (resnet's deep layers, its stem and 1×1 downsampling,
// mobilenet's and efficientnet's depthwise 3×3 and 5×5, squeeze-excite 1×1 on 1×1), on inputs
// with ±0, subnormals, ±inf and NaN, at one thread and at three.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "kernels/conv.h"
#include "kernels/parallel.h"
#include "tests/kernels/kernel_test_util.h"

namespace vt::kernels {
namespace {
namespace schedules {  // the kernel tests build as one unit: names of their own

float fused(float a, float b, float c) { return std::fma(a, b, c); }

// Inputs with the values whose arithmetic is easy to get subtly wrong: about one in seven ±0, a
// subnormal or a huge value, and (with `nonfinite`) one each of +inf, −inf and NaN, which spread
// through every chain they enter.
std::vector<float> awkward_floats(std::size_t n, std::uint32_t seed, bool nonfinite = true) {
  std::vector<float> v = random_floats(n, seed);
  const float specials[] = {0.0f, -0.0f, std::numeric_limits<float>::denorm_min(), -1e-40f, 1e30f};
  for (std::size_t i = seed % 7; i < n; i += 7 + (i % 5)) v[i] = specials[(i / 7) % 5];
  if (nonfinite && n >= 3) {
    v[n / 3] = std::numeric_limits<float>::infinity();
    v[n / 2] = -std::numeric_limits<float>::infinity();
    v[n - 1] = std::numeric_limits<float>::quiet_NaN();
  }
  return v;
}

// Bits equal, any NaN matching any NaN (the docs define a NaN's presence, not its payload).
::testing::AssertionResult same_values(const std::vector<float>& got,
                                       const std::vector<float>& want) {
  if (got.size() != want.size()) return ::testing::AssertionFailure() << "sizes differ";
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(got[i]) && std::isnan(want[i])) continue;
    if (std::bit_cast<std::uint32_t>(got[i]) != std::bit_cast<std::uint32_t>(want[i]))
      return ::testing::AssertionFailure()
             << "element " << i << ": " << got[i] << " instead of " << want[i];
  }
  return ::testing::AssertionSuccess();
}

struct Case {
  std::string name;
  ConvShape s;
  std::int64_t groups = 1;
};

Case make(std::string name, std::int64_t batch, std::int64_t in, std::int64_t out, std::int64_t h,
          std::int64_t w, std::int64_t k, std::int64_t stride, std::int64_t pad,
          std::int64_t groups = 1) {
  Case c{std::move(name), {}, groups};
  c.s.batch = batch;
  c.s.in_channels = in;
  c.s.out_channels = out;
  c.s.in[1] = h;
  c.s.in[2] = w;
  c.s.kernel[1] = c.s.kernel[2] = k;
  c.s.stride[1] = c.s.stride[2] = stride;
  c.s.padding[1] = c.s.padding[2] = pad;
  return c;
}

// The definitions (conv.h, docs/portable.md "Convolution" and "further forms"), group by group.
struct Reference {
  const ConvShape& s;
  std::int64_t groups;
  std::int64_t cg() const { return s.in_channels / groups; }
  std::int64_t og() const { return s.out_channels / groups; }
  std::int64_t rows() const { return cg() * s.taps(); }

  // Input position that column entry (channel c, tap, output p) reads, or -1 in the padding.
  std::int64_t read(std::int64_t tap, std::int64_t p) const {
    const std::int64_t v = tap % s.kernel[2], u = tap / s.kernel[2] % s.kernel[1];
    const std::int64_t t = tap / (s.kernel[2] * s.kernel[1]);
    const std::int64_t j = p % s.out(2), i = p / s.out(2) % s.out(1), z = p / (s.out(2) * s.out(1));
    const std::int64_t zz = z * s.stride[0] + t - s.padding[0];
    const std::int64_t ii = i * s.stride[1] + u - s.padding[1];
    const std::int64_t jj = j * s.stride[2] + v - s.padding[2];
    if (zz < 0 || zz >= s.in[0] || ii < 0 || ii >= s.in[1] || jj < 0 || jj >= s.in[2]) return -1;
    return (zz * s.in[1] + ii) * s.in[2] + jj;
  }
  float col(const std::vector<float>& x, std::int64_t b, std::int64_t c, std::int64_t tap,
            std::int64_t p) const {
    const std::int64_t at = read(tap, p);
    return at < 0 ? 0.0f
                  : x[static_cast<std::size_t>((b * s.in_channels + c) * s.in_positions() + at)];
  }
  float weight(const std::vector<float>& w, std::int64_t o, std::int64_t q) const {
    return w[static_cast<std::size_t>(o * rows() + q)];
  }
  float grad(const std::vector<float>& dy, std::int64_t b, std::int64_t o, std::int64_t p) const {
    return dy[static_cast<std::size_t>((b * s.out_channels + o) * s.out_positions() + p)];
  }

  std::vector<float> forward(const std::vector<float>& x, const std::vector<float>& w,
                             const std::vector<float>& bias) const {
    std::vector<float> y(static_cast<std::size_t>(s.batch * s.out_channels * s.out_positions()));
    for (std::int64_t b = 0; b < s.batch; ++b) {
      for (std::int64_t o = 0; o < s.out_channels; ++o) {
        const std::int64_t c0 = o / og() * cg();
        for (std::int64_t p = 0; p < s.out_positions(); ++p) {
          float acc = 0.0f;
          for (std::int64_t q = 0; q < rows(); ++q)
            acc = fused(weight(w, o, q), col(x, b, c0 + q / s.taps(), q % s.taps(), p), acc);
          y[static_cast<std::size_t>((b * s.out_channels + o) * s.out_positions() + p)] =
              acc + bias[static_cast<std::size_t>(o)];
        }
      }
    }
    return y;
  }

  std::vector<float> weight_gradient(const std::vector<float>& x,
                                     const std::vector<float>& dy) const {
    std::vector<float> dw(static_cast<std::size_t>(s.out_channels * rows()));
    for (std::int64_t o = 0; o < s.out_channels; ++o) {
      const std::int64_t c0 = o / og() * cg();
      for (std::int64_t q = 0; q < rows(); ++q) {
        float acc = 0.0f;
        for (std::int64_t b = 0; b < s.batch; ++b) {
          for (std::int64_t p = 0; p < s.out_positions(); ++p)
            acc = fused(grad(dy, b, o, p), col(x, b, c0 + q / s.taps(), q % s.taps(), p), acc);
        }
        dw[static_cast<std::size_t>(o * rows() + q)] = acc;
      }
    }
    return dw;
  }

  bool transposed() const {
    for (int d = 0; d < 3; ++d) {
      if (s.stride[d] != 1 || s.padding[d] > s.kernel[d] - 1) return false;
    }
    return true;
  }

  std::vector<float> input_gradient(const std::vector<float>& w,
                                    const std::vector<float>& dy) const {
    std::vector<float> dx(static_cast<std::size_t>(s.batch * s.in_channels * s.in_positions()),
                          0.0f);
    const std::int64_t taps = s.taps();
    for (std::int64_t b = 0; b < s.batch; ++b) {
      for (std::int64_t c = 0; c < s.in_channels; ++c) {
        const std::int64_t o0 = c / cg() * og(), cl = c % cg();
        float* dxc = dx.data() + (b * s.in_channels + c) * s.in_positions();
        if (transposed()) {
          // One chain over (o, t, u, v) of the flipped weights by dy, padding k − 1 − p.
          for (std::int64_t pos = 0; pos < s.in_positions(); ++pos) {
            float acc = 0.0f;
            for (std::int64_t o = o0; o < o0 + og(); ++o) {
              for (std::int64_t tap = 0; tap < taps; ++tap) {
                // Flipped tap `tap` reads dy at pos + tap − (k − 1 − p): the output position
                // whose unflipped tap taps − 1 − tap reads pos.
                const std::int64_t v = tap % s.kernel[2], u = tap / s.kernel[2] % s.kernel[1];
                const std::int64_t t = tap / (s.kernel[2] * s.kernel[1]);
                const std::int64_t jj = pos % s.in[2], ii = pos / s.in[2] % s.in[1];
                const std::int64_t zz = pos / (s.in[2] * s.in[1]);
                const std::int64_t z = zz + t - (s.kernel[0] - 1 - s.padding[0]);
                const std::int64_t i = ii + u - (s.kernel[1] - 1 - s.padding[1]);
                const std::int64_t j = jj + v - (s.kernel[2] - 1 - s.padding[2]);
                const bool inside =
                    z >= 0 && z < s.out(0) && i >= 0 && i < s.out(1) && j >= 0 && j < s.out(2);
                const float g = inside ? grad(dy, b, o, (z * s.out(1) + i) * s.out(2) + j) : 0.0f;
                acc = fused(weight(w, o, cl * taps + taps - 1 - tap), g, acc);
              }
            }
            dxc[pos] = acc;
          }
          continue;
        }
        // dcol (a chain over o), added tap by tap where it was read.
        for (std::int64_t tap = 0; tap < taps; ++tap) {
          for (std::int64_t p = 0; p < s.out_positions(); ++p) {
            float dcol = 0.0f;
            for (std::int64_t o = o0; o < o0 + og(); ++o)
              dcol = fused(weight(w, o, cl * taps + tap), grad(dy, b, o, p), dcol);
            const std::int64_t at = read(tap, p);
            if (at >= 0) dxc[at] = dxc[at] + dcol;
          }
        }
      }
    }
    return dx;
  }
};

TEST(ConvSchedules, EveryPathGivesTheDefinitionsBitsAtRealCnnShapes) {
  std::vector<Case> cases = {
      make("3x3 at 4x4 (resnet layer2)", 3, 20, 24, 4, 4, 3, 1, 1),
      make("3x3 at 1x1 (resnet layer4 on 32x32 images)", 5, 9, 18, 1, 1, 3, 1, 1),
      make("3x3 stride 2 (a stage's first)", 3, 6, 10, 7, 5, 3, 2, 1),
      make("1x1 stride 2 (downsampling)", 2, 12, 20, 8, 6, 1, 2, 0),
      make("1x1 on 1x1 (squeeze-excite)", 4, 24, 6, 1, 1, 1, 1, 0),
      make("7x7 stride 2 stem", 2, 3, 8, 18, 18, 7, 2, 3),
      make("3x3 at 18x18 (many positions: the grid)", 2, 4, 9, 18, 18, 3, 1, 1),
      make("depthwise 3x3", 3, 19, 19, 6, 5, 3, 1, 1, 19),
      make("depthwise 3x3 stride 2", 2, 17, 17, 7, 9, 3, 2, 1, 17),
      make("depthwise 5x5 stride 2", 2, 20, 20, 9, 9, 5, 2, 2, 20),
      make("depthwise 5x5 at 18x18", 2, 33, 33, 18, 18, 5, 1, 2, 33),
      make("depthwise 3x3 at 1x1", 4, 40, 40, 1, 1, 3, 1, 1, 40),
      make("grouped 3x3 (two channels a group)", 2, 8, 12, 5, 5, 3, 1, 1, 4),
  };
  Case deep = make("3-d depthwise 3x3x3", 2, 5, 5, 4, 5, 3, 1, 1, 5);
  deep.s.in[0] = 3;
  deep.s.kernel[0] = 3;
  deep.s.padding[0] = 1;
  cases.push_back(deep);
  for (int threads : {1, 3}) {
    set_threads(threads);
    for (const Case& c : cases) {
      SCOPED_TRACE(c.name + ", " + std::to_string(threads) + " threads");
      const ConvShape& s = c.s;
      const Reference ref{s, c.groups};
      const auto x =
          awkward_floats(static_cast<std::size_t>(s.batch * s.in_channels * s.in_positions()), 21);
      const auto w =
          awkward_floats(static_cast<std::size_t>(s.out_channels * ref.rows()), 22, false);
      const auto bias = random_floats(static_cast<std::size_t>(s.out_channels), 23);
      const auto dy = awkward_floats(
          static_cast<std::size_t>(s.batch * s.out_channels * s.out_positions()), 24);
      std::vector<float> y(dy.size()), dx(x.size()), dw(w.size()), dbias(bias.size());
      grouped_conv_forward(s, c.groups, x.data(), w.data(), bias.data(), y.data());
      grouped_conv_backward(s, c.groups, x.data(), w.data(), dy.data(), dx.data(), dw.data(),
                            dbias.data());
      EXPECT_TRUE(same_values(y, ref.forward(x, w, bias))) << "y";
      EXPECT_TRUE(same_values(dw, ref.weight_gradient(x, dy))) << "dw";
      EXPECT_TRUE(same_values(dx, ref.input_gradient(w, dy))) << "dx";
      std::vector<float> want_dbias(bias.size());
      for (std::int64_t o = 0; o < s.out_channels; ++o) {
        float sum = 0.0f;
        for (std::int64_t b = 0; b < s.batch; ++b) {
          for (std::int64_t p = 0; p < s.out_positions(); ++p) sum = sum + ref.grad(dy, b, o, p);
        }
        want_dbias[static_cast<std::size_t>(o)] = sum;
      }
      EXPECT_TRUE(same_values(dbias, want_dbias)) << "dbias";
    }
  }
  set_threads(1);
}

}  // namespace schedules
}  // namespace
}  // namespace vt::kernels
