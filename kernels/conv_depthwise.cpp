// Depthwise convolutions (groups = input channels = output channels: mobilenet's and
// efficientnet's) computed directly. As C groups of one channel each (conv.h) every product
// would have one row, a micro-kernel tile computing one row in eight; here each output is its
// product chain over the taps, in the taps' order, in a loop of its own (depthwise_micro.h),
// with the operands the one-row product has: the same bits.
//   forward, and dx at stride 1 (the transposed, flipped convolution, depthwise again): vector
//     lanes hold neighbouring output columns, read in place from the channel's grid;
//   dw: lanes hold neighbouring channels (channels-last copies of x and dy), each lane's chain
//     over (b, then p) in order;
//   dx otherwise: dcol, each entry its one-term chain w·dy, then added into dx tap by tap.
#include <algorithm>
#include <vector>

#include "kernels/conv_grid.h"
#include "kernels/conv_paths.h"
#include "kernels/gemm_kernel.h"
#include "kernels/isa.h"
#include "kernels/parallel.h"

namespace vt::kernels {
namespace {

constexpr std::int64_t kLanes = 16;  // widths are rounded up to this: a multiple of every ISA's

std::int64_t round_up(std::int64_t x) { return (x + kLanes - 1) / kLanes * kLanes; }

const DepthwiseKernel& depthwise_kernel() {
  static const DepthwiseKernel kernel = [] {
#if defined(__x86_64__)
    switch (isa()) {
      case Isa::kAvx512:
        return avx512::depthwise_kernel();
      case Isa::kAvx2:
        return avx2::depthwise_kernel();
      case Isa::kGeneric:
        break;
      case Isa::kScalar:
        return scalar::depthwise_kernel();
    }
#endif
    return generic::depthwise_kernel();
  }();
  return kernel;
}

// One channel of one example: the shape each group of a depthwise convolution has.
ConvShape channel_shape(const ConvShape& s) {
  ConvShape one = s;
  one.in_channels = one.out_channels = 1;
  return one;
}

// The grid of one channel, with room past its end for the vectors of its last row.
float* channel_grid(int which, const Grid& grid) {
  float* g = scratch(which, grid.example + kLanes);
  std::fill(g + grid.example, g + grid.example + kLanes, 0.0f);
  return g;
}

}  // namespace

bool is_depthwise(const ConvShape& s, std::int64_t groups) {
  return groups > 1 && s.in_channels == groups && s.out_channels == groups && !s.dilated();
}

void depthwise_conv_forward(const ConvShape& s, const float* x, const float* w, const float* bias,
                            float* y) {
  const ConvShape one = channel_shape(s);
  const Grid grid = grid_of(one);
  const DepthwiseKernel& kernel = depthwise_kernel();
  const std::int64_t channels = s.in_channels, taps = s.taps();
  const std::int64_t oh = s.out(1), ow = s.out(2), width = round_up(ow);
  const std::int64_t slice = grid.dims[1] * grid.dims[2];  // one z of a phase's plane
  parallel_for(s.batch * channels, 1, [&](std::int64_t begin, std::int64_t end) {
    float* own = channel_grid(0, grid);
    float* rows = scratch(1, oh * width);
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t c = item % channels;
      fill_channel(one, grid, x + item * s.in_positions(), 0, own);
      for (std::int64_t z = 0; z < s.out(0); ++z) {
        kernel.tap_chains(oh, ow, taps, w + c * taps, own + z * slice, grid.offsets.data(),
                          grid.dims[2], rows, width);
        float* to = y + item * s.out_positions() + z * oh * ow;
        for (std::int64_t i = 0; i < oh; ++i) {
          const float* from = rows + i * width;
          if (bias == nullptr) {
            std::copy(from, from + ow, to + i * ow);
          } else {
            for (std::int64_t j = 0; j < ow; ++j) to[i * ow + j] = from[j] + bias[c];
          }
        }
      }
    }
  });
}

namespace {

// dw of channels [c0, c0 + kLanes) (those < C): x's grids and dy copied channels-last, so that
// a vector holds the lanes' channels at one position.
void weight_gradient_block(const ConvShape& s, const Grid& grid, const float* x, const float* dy,
                           std::int64_t c0, const std::vector<std::int64_t>& starts,
                           const std::vector<std::int64_t>& offsets, float* dw) {
  const ConvShape one = channel_shape(s);
  const std::int64_t channels = s.in_channels, positions = s.out_positions(), taps = s.taps();
  const std::int64_t lanes = std::min(kLanes, channels - c0);
  float* own = channel_grid(0, grid);
  float* x_t = scratch(1, s.batch * grid.example * kLanes);
  float* dy_t = scratch(2, s.batch * positions * kLanes);
  float* dw_t = scratch(3, taps * kLanes);
  for (std::int64_t b = 0; b < s.batch; ++b) {
    float* xb = x_t + b * grid.example * kLanes;
    float* dyb = dy_t + b * positions * kLanes;
    for (std::int64_t l = 0; l < kLanes; ++l) {
      if (l >= lanes) {  // past C: zeros, computed and dropped
        for (std::int64_t g = 0; g < grid.example; ++g) xb[g * kLanes + l] = 0.0f;
        for (std::int64_t p = 0; p < positions; ++p) dyb[p * kLanes + l] = 0.0f;
        continue;
      }
      const std::int64_t item = b * channels + c0 + l;
      fill_channel(one, grid, x + item * s.in_positions(), 0, own);
      for (std::int64_t g = 0; g < grid.example; ++g) xb[g * kLanes + l] = own[g];
      const float* dyc = dy + item * positions;
      for (std::int64_t p = 0; p < positions; ++p) dyb[p * kLanes + l] = dyc[p];
    }
  }
  depthwise_kernel().weight_chains(s.batch * positions, kLanes, taps, x_t, starts.data(),
                                   offsets.data(), dy_t, kLanes, dw_t, kLanes, false);
  for (std::int64_t l = 0; l < lanes; ++l) {
    for (std::int64_t tap = 0; tap < taps; ++tap)
      dw[(c0 + l) * taps + tap] = dw_t[tap * kLanes + l];
  }
}

void depthwise_weight_gradient(const ConvShape& s, const float* x, const float* dy, float* dw) {
  const Grid grid = grid_of(channel_shape(s));
  const std::int64_t oh = s.out(1), ow = s.out(2), positions = s.out_positions();
  // Where output (b, p)'s tap 0 reads in the channels-last grids, and each tap's offset from it.
  std::vector<std::int64_t> starts(static_cast<std::size_t>(s.batch * positions));
  for (std::int64_t b = 0; b < s.batch; ++b) {
    for (std::int64_t p = 0; p < positions; ++p) {
      const std::int64_t z = p / (oh * ow), i = p / ow % oh, j = p % ow;
      starts[static_cast<std::size_t>(b * positions + p)] =
          (b * grid.example + (z * grid.dims[1] + i) * grid.dims[2] + j) * kLanes;
    }
  }
  std::vector<std::int64_t> offsets(grid.offsets);
  for (std::int64_t& o : offsets) o *= kLanes;
  const std::int64_t blocks = (s.in_channels + kLanes - 1) / kLanes;
  parallel_for(blocks, 1, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t block = begin; block < end; ++block)
      weight_gradient_block(s, grid, x, dy, block * kLanes, starts, offsets, dw);
  });
}

// dx by the dcol form: per channel, dcol[tap][p] = w[tap]·dy[p] (a one-term chain), then added.
void depthwise_strided_dx(const ConvShape& s, const float* w, const float* dy, float* dx) {
  const ConvShape one = channel_shape(s);
  const std::int64_t channels = s.in_channels, taps = s.taps();
  const std::int64_t positions = s.out_positions(), width = round_up(positions);
  const DepthwiseKernel& kernel = depthwise_kernel();
  parallel_for(s.batch * channels, 1, [&](std::int64_t begin, std::int64_t end) {
    float* own = scratch(0, width);
    float* dcol = scratch(1, taps * width);
    const std::int64_t at_start = 0;
    for (std::int64_t item = begin; item < end; ++item) {
      const std::int64_t c = item % channels;
      std::copy(dy + item * positions, dy + (item + 1) * positions, own);
      std::fill(own + positions, own + width, 0.0f);
      for (std::int64_t tap = 0; tap < taps; ++tap)
        kernel.tap_chains(1, positions, 1, w + c * taps + tap, own, &at_start, 0,
                          dcol + tap * width, width);
      add_columns(one, dcol, width, dx + item * s.in_positions());
    }
  });
}

}  // namespace

void depthwise_conv_backward(const ConvShape& s, const float* x, const float* w, const float* dy,
                             float* dx, float* dw, float* dbias) {
  if (dw != nullptr) depthwise_weight_gradient(s, x, dy, dw);
  if (dx != nullptr && dx_is_transposed_convolution(s)) {
    // The transposed convolution of each channel by its flipped taps: depthwise again.
    ConvShape t = s;
    for (int d = 0; d < 3; ++d) {
      t.in[d] = s.out(d);
      t.padding[d] = s.kernel[d] - 1 - s.padding[d];
    }
    const std::int64_t taps = s.taps();
    std::vector<float> flipped(static_cast<std::size_t>(s.in_channels * taps));
    for (std::int64_t c = 0; c < s.in_channels; ++c) {
      for (std::int64_t tap = 0; tap < taps; ++tap)
        flipped[static_cast<std::size_t>(c * taps + taps - 1 - tap)] = w[c * taps + tap];
    }
    depthwise_conv_forward(t, dy, flipped.data(), nullptr, dx);
  } else if (dx != nullptr) {
    depthwise_strided_dx(s, w, dy, dx);
  }
  if (dbias != nullptr) bias_gradient(s, dy, dbias);
}

}  // namespace vt::kernels
