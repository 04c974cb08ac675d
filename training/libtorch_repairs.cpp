// Repairs of LibTorch kernels whose result depends on memory they never wrote (docs/training.md,
// "LibTorch's repaired kernels"). Each repair changes only the calls that were broken: every
// other call reaches LibTorch's own kernel with the same operands, so its bits stay LibTorch's.
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <memory>
#include <mutex>

#include "training/runtime.h"

namespace vt::training {
namespace {

// LibTorch 1.13's CPU gelu_backward hands both operands to oneDNN whenever `self` is dense, and
// oneDNN reads `grad` as if it were dense too. A gradient that reaches a GELU through a transpose
// or a channels-last layout (torchaudio's wav2vec 2.0 feature extractor: `x.transpose(1, 2)`
// after its last GELU) is read out of order and partly from memory outside its values: the
// result changes from call to call. Giving oneDNN a dense copy of `grad` is what LibTorch does
// with a dense gradient, so these calls get the bits a dense call gets.
at::Tensor gelu_backward_with_dense_grad(c10::DispatchKeySet keys, const at::Tensor& grad,
                                         const at::Tensor& self, c10::string_view approximate) {
  static const auto op =
      c10::Dispatcher::singleton()
          .findSchemaOrThrow("aten::gelu_backward", "")
          .typed<at::Tensor(const at::Tensor&, const at::Tensor&, c10::string_view)>();
  const c10::DispatchKeySet below =
      keys & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, c10::DispatchKey::BackendSelect);
  if (grad.is_cpu() && self.is_contiguous() && !grad.is_contiguous())
    return op.redispatch(below, grad.contiguous(), self, approximate);
  return op.redispatch(below, grad, self, approximate);
}

}  // namespace

// BackendSelect runs for every call, below autograd and above the CPU kernel, so the repair sees
// the calls autograd makes in backward as well as direct ones, and passes each on unchanged or
// with a dense gradient.
void install_libtorch_repairs() {
  static std::once_flag once;
  std::call_once(once, [] {
    static auto* repairs = new torch::Library(torch::Library::IMPL, "aten",
                                              c10::DispatchKey::BackendSelect, __FILE__, __LINE__);
    repairs->impl("gelu_backward", TORCH_FN(gelu_backward_with_dense_grad));
  });
}

}  // namespace vt::training
