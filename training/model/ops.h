#pragma once
// The operators the zoo models are written in, in two arithmetics (docs/portable.md):
// LibTorch's own kernels, exactly what the modules' own forward() runs (exact and tolerance
// mode), and veritrain's portable kernels (kernels/), whose bits depend on the task alone.
// Internal to training/: LibTorch types.

#include <torch/torch.h>

#include <cstdint>
#include <memory>
#include <string>

#include "training/model/network.h"

namespace vt::training {

class Ops {
 public:
  virtual ~Ops() = default;
  virtual bool portable() const = 0;

  virtual at::Tensor linear(torch::nn::LinearImpl& m, const at::Tensor& x) = 0;
  virtual at::Tensor conv2d(torch::nn::Conv2dImpl& m, const at::Tensor& x) = 0;
  virtual at::Tensor conv3d(torch::nn::Conv3dImpl& m, const at::Tensor& x) = 0;
  virtual at::Tensor batch_norm(torch::nn::BatchNorm2dImpl& m, const at::Tensor& x) = 0;
  // relu(batch_norm(m, x)), which an arithmetic may compute in one pass.
  virtual at::Tensor batch_norm_relu(torch::nn::BatchNorm2dImpl& m, const at::Tensor& x) {
    return relu(batch_norm(m, x));
  }
  virtual at::Tensor layer_norm(torch::nn::LayerNormImpl& m, const at::Tensor& x) = 0;
  // tok(tokens) + pos(0..T−1), the positions broadcast over the batch: [B, T] -> [B, T, D].
  virtual at::Tensor embed(torch::nn::EmbeddingImpl& tok, torch::nn::EmbeddingImpl& pos,
                           const at::Tensor& tokens) = 0;
  virtual at::Tensor dropout(torch::nn::DropoutImpl& m, const at::Tensor& x) {
    return dropout(x, m.options.p(), m.is_training());
  }
  // Dropout with probability p where `training` (a TorchScript module's aten::dropout).
  virtual at::Tensor dropout(const at::Tensor& x, double p, bool training) = 0;
  // The dropout stream's state and the next call number of this forward pass, for the other
  // random operators of a portable TorchScript module (feature_dropout, bernoulli_); false in
  // LibTorch's arithmetic, which draws from its own generators.
  virtual bool next_draw(std::uint64_t& state, std::uint64_t& call) {
    (void)state, (void)call;
    return false;
  }
  // Where this forward pass's draws stand (the next call number), so that a recomputed block
  // (activation checkpointing) draws its masks again; 0 and nothing in LibTorch's arithmetic,
  // whose generators are saved and restored instead.
  virtual std::uint64_t draw_position() const { return 0; }
  virtual void set_draw_position(std::uint64_t position) { (void)position; }
  virtual at::Tensor relu(const at::Tensor& x) = 0;
  virtual at::Tensor gelu(const at::Tensor& x) = 0;
  // [B, C, H, W] -> [B, C]: the mean over the spatial positions.
  virtual at::Tensor spatial_mean(const at::Tensor& x) = 0;
  // Causal self-attention of qkv [B, T, 3D] (q, k and v side by side, `heads` heads of d = D /
  // heads each): softmax(q·kᵀ / √d, query i seeing keys 0..i), dropout, times v, the heads
  // merged back: [B, T, D].
  virtual at::Tensor attention(const at::Tensor& qkv, std::int64_t heads,
                               torch::nn::DropoutImpl& drop) = 0;
  // The task's loss ("cross_entropy" flattens token dimensions, "mse").
  virtual at::Tensor loss(const LossSpec& loss, const at::Tensor& output,
                          const at::Tensor& target) = 0;
  // Before each training forward pass: portable dropout masks are keyed by the step and the
  // gradient group, and count their calls from here.
  virtual void begin_forward(std::int64_t global_step, std::int64_t group) {
    (void)global_step, (void)group;
  }
};

std::unique_ptr<Ops> torch_ops();
// `seed`: the task's; every random draw of the portable arithmetic derives from it.
std::unique_ptr<Ops> portable_ops(std::uint64_t seed);

// Portable initial weights (docs/portable.md, "Initial weights") of `module`'s parameters, by
// the kind of module that holds each one; `seed` is the task's.
void portable_init(torch::nn::Module& module, std::uint64_t seed);

}  // namespace vt::training
