#pragma once
// What the differentiable portable functions share: float32 CPU operands made contiguous (an
// exact copy) and their data pointers. Internal to training/ (LibTorch types).

#include <ATen/ATen.h>
#include <torch/csrc/autograd/custom_function.h>

#include <cstdint>

namespace vt::training::portable {

inline at::Tensor operand(const at::Tensor& t, const char* op) {
  TORCH_CHECK(t.scalar_type() == at::kFloat && t.device().is_cpu(), "portable ", op,
              ": float32 CPU tensors only, got ", t.scalar_type(), " on ", t.device());
  return t.contiguous();
}
inline float* ptr(const at::Tensor& t) { return t.data_ptr<float>(); }
inline float* ptr_or_null(const at::Tensor& t) {
  return t.defined() && t.numel() > 0 ? t.data_ptr<float>() : nullptr;
}

// LibTorch 1.13's Function::apply cannot take an undefined tensor: an absent bias or affine
// weight travels as an empty one (a real one is never empty), and ptr_or_null reads it as none.
inline at::Tensor optional_input(const at::Tensor& t) {
  return t.defined() ? t : at::empty({0}, at::TensorOptions().dtype(at::kFloat));
}

// A dropout's draw (docs/portable.md, "Dropout"): its probability, and the generator state and
// call index the mask is drawn from. forward keeps it so that backward draws the same mask again.
struct DropoutDraw {
  float p;
  std::uint64_t state;
  std::uint64_t call;
};
inline void keep_draw(torch::autograd::AutogradContext* ctx, double p, std::int64_t state,
                      std::int64_t call) {
  ctx->saved_data["p"] = p;
  ctx->saved_data["state"] = state;
  ctx->saved_data["call"] = call;
}
inline DropoutDraw kept_draw(torch::autograd::AutogradContext* ctx) {
  return {static_cast<float>(ctx->saved_data["p"].toDouble()),
          static_cast<std::uint64_t>(ctx->saved_data["state"].toInt()),
          static_cast<std::uint64_t>(ctx->saved_data["call"].toInt())};
}

}  // namespace vt::training::portable
