#pragma once
// The portable kernels of real models' operators (docs/portable.md, "More functions" and
// "Operators of real models") as differentiable LibTorch functions: activations, pooling,
// transposed convolutions, batched products, broadcasting, reductions and softmax along any
// dimension (the layers: portable/layers.h). Each forward and backward is kernels/ arithmetic;
// LibTorch only copies and routes gradients. Float32 CPU tensors only. Internal to training/
// (LibTorch types).

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "kernels/activation.h"
#include "kernels/reduce.h"

namespace vt::training::portable {

at::Tensor activation(const at::Tensor& x, kernels::Activation f,
                      const kernels::ActivationParams& p);

// [B, C, H, W] (or [C, H, W]) pooling; stride empty: the kernel size. indices (may be null)
// receives max_pool2d's argmax per output as LibTorch numbers it (h·W + w within the plane).
at::Tensor max_pool2d(const at::Tensor& x, at::IntArrayRef kernel, at::IntArrayRef stride,
                      at::IntArrayRef padding, at::IntArrayRef dilation, bool ceil_mode,
                      at::Tensor* indices = nullptr);
at::Tensor avg_pool2d(const at::Tensor& x, at::IntArrayRef kernel, at::IntArrayRef stride,
                      at::IntArrayRef padding, bool ceil_mode, bool count_include_pad,
                      std::optional<std::int64_t> divisor_override);
at::Tensor adaptive_avg_pool2d(const at::Tensor& x, at::IntArrayRef output_size);
std::tuple<at::Tensor, at::Tensor> adaptive_max_pool2d(const at::Tensor& x,
                                                       at::IntArrayRef output_size);

// [B, C, H, W] to output_size, or to ⌊H · scale⌋ × ⌊W · scale⌋: exactly one of the two given
// (the other empty).
at::Tensor upsample_bilinear2d(const at::Tensor& x, const std::vector<std::int64_t>& output_size,
                               bool align_corners, const std::vector<double>& scales);
// [B, C, ...] of 1 to 3 spatial dimensions, nearest neighbours, as upsample_bilinear2d's sizes.
at::Tensor upsample_nearest(const at::Tensor& x, const std::vector<std::int64_t>& output_size,
                            const std::vector<double>& scales);

// w [C, O/G, k...], x [B, C, ...]: the dx of the convolution whose weight w is.
at::Tensor conv_transpose(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b,
                          at::IntArrayRef stride, at::IntArrayRef padding,
                          at::IntArrayRef output_padding, at::IntArrayRef dilation,
                          std::int64_t groups);

// c + a·b over batches ([N, M, K]·[N, K, P]), scaled as addmm/baddbmm; c may be undefined.
at::Tensor baddbmm(const at::Tensor& c, const at::Tensor& a, const at::Tensor& b, double beta,
                   double alpha);
// torch.matmul's shapes, on portable products (docs/portable.md, "Products").
at::Tensor matmul(const at::Tensor& a, const at::Tensor& b);
// x expanded to `shape` (a copy); its gradient is the chain, per element, over the positions it
// was copied to. What every broadcast in a portable module goes through.
at::Tensor broadcast_to(const at::Tensor& x, at::IntArrayRef shape);

at::Tensor reduce(const at::Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim,
                  kernels::Reduction r);
at::Tensor softmax(const at::Tensor& x, std::int64_t dim);
at::Tensor log_softmax(const at::Tensor& x, std::int64_t dim);

}  // namespace vt::training::portable
