// veritrain::einsum (docs/portable.md, "Einsum"): torch.einsum of one or two operands as
// script/einsum_plan.h plans it, on portable sums and one portable batched product; the moves
// between them round nothing. Registered beside script/operators.cpp's.
#include <torch/library.h>

#include <string_view>
#include <vector>

#include "training/portable/functions.h"
#include "training/portable/operators.h"
#include "training/script/einsum_plan.h"

namespace vt::training {
namespace {

using at::Tensor;

Tensor summed(const Tensor& x, const std::vector<std::int64_t>& dims) {
  return dims.empty() ? x : portable::reduce(x, dims, false, kernels::Reduction::kSum);
}

std::int64_t product_of(at::IntArrayRef sizes, std::size_t from, std::size_t count) {
  std::int64_t n = 1;
  for (std::size_t i = from; i < from + count; ++i) n *= sizes[i];
  return n;
}

Tensor einsum(c10::string_view equation, at::TensorList tensors,
              at::OptionalIntArrayRef /*path: two operands have one order*/) {
  std::vector<std::vector<std::int64_t>> shapes;
  for (const Tensor& t : tensors) shapes.push_back(t.sizes().vec());
  const std::string_view text(equation.data(), equation.size());
  const auto plan = plan_einsum(text, shapes);
  TORCH_CHECK(plan.ok(), "portable einsum '", text, "': ", plan.ok() ? "" : plan.error().message);
  const Tensor a = summed(tensors[0], plan->a_sum);
  if (plan->operands == 1) return a.permute(plan->out_perm);
  const Tensor b = summed(tensors[1], plan->b_sum);
  const Tensor pa = a.permute(plan->a_perm), pb = b.permute(plan->b_perm);
  const std::size_t batch = plan->batch, left = plan->left, k = plan->contracted;
  const std::int64_t n_batch = product_of(pa.sizes(), 0, batch);
  const std::int64_t m = product_of(pa.sizes(), batch, left);
  const std::int64_t n_k = product_of(pa.sizes(), batch + left, k);
  const std::int64_t n = product_of(pb.sizes(), batch + k, plan->right);
  const Tensor y = portable::bmm(pa.reshape({n_batch, m, n_k}), pb.reshape({n_batch, n_k, n}));
  std::vector<std::int64_t> sizes(pa.sizes().begin(), pa.sizes().begin() + batch + left);
  sizes.insert(sizes.end(), pb.sizes().begin() + batch + k, pb.sizes().end());
  return y.reshape(sizes).permute(plan->out_perm);
}

}  // namespace

TORCH_LIBRARY_IMPL(veritrain, CompositeImplicitAutograd, m) { m.impl("einsum", &einsum); }

}  // namespace vt::training
