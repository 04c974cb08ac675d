// The veritrain:: operators of indexing (docs/portable.md, "Indexing"): selections and
// assignments that round nothing, whose gradients are portable where LibTorch's would sum in an
// order of its threads' choosing. Registered beside script/operators.cpp's.
#include <torch/library.h>

#include <vector>

#include "training/portable/functions.h"
#include "training/portable/operators.h"

namespace vt::training {
namespace {

using at::Tensor;
using Indices = c10::List<c10::optional<Tensor>>;

std::vector<std::size_t> given(const Indices& indices) {
  std::vector<std::size_t> at;
  for (std::size_t i = 0; i < indices.size(); ++i) {
    const c10::optional<Tensor> index = indices.get(i);
    if (index.has_value() && index->defined()) at.push_back(i);
  }
  return at;
}

bool is_mask(const Tensor& index) {
  return index.scalar_type() == at::kBool || index.scalar_type() == at::kByte;
}

// x[ids] along one dimension d: the rows of x (moved to the front, the rest flattened) that ids
// name, as an embedding looks them up; its gradient is the embedding's, each row's copies summed
// in the order of ids. A mask (x[mask]) selects each position at most once: LibTorch's own
// selection, whose gradient adds each value to a zero once. Any other indexing is refused.
Tensor index(const Tensor& x, const Indices& indices) {
  const std::vector<std::size_t> at = given(indices);
  TORCH_CHECK(at.size() == 1,
              "portable index: one index tensor (x[ids] or x[mask], along any one dimension), got ",
              at.size());
  const auto d = static_cast<int64_t>(at[0]);
  const Tensor ids = *indices.get(at[0]);
  if (is_mask(ids)) return at::index(x, indices);
  TORCH_CHECK(!at::isFloatingType(ids.scalar_type()), "portable index: an index of ",
              ids.scalar_type());
  const Tensor moved = x.movedim(d, 0);
  const int64_t rows = moved.size(0);
  const Tensor wrapped = at::where(ids < 0, ids + rows, ids);
  const Tensor table = moved.reshape({rows, -1});
  std::vector<int64_t> shape(ids.sizes().begin(), ids.sizes().end());
  shape.insert(shape.end(), moved.sizes().begin() + 1, moved.sizes().end());
  Tensor y = portable::embedding(wrapped, table).view(shape);
  // PyTorch's order: x's dimensions before d, then ids', then x's after d.
  const int64_t k = ids.dim();
  std::vector<int64_t> order;
  for (int64_t i = 0; i < d; ++i) order.push_back(k + i);
  for (int64_t i = 0; i < k; ++i) order.push_back(i);
  for (int64_t i = k + d; i < y.dim(); ++i) order.push_back(i);
  return y.permute(order);
}

// x[indices] = values without accumulation: values broadcast to what indices select (portably:
// their gradient is the broadcast's), written once each. Integer indices must not repeat (which
// copy LibTorch's threads would leave is not fixed); accumulate=True is refused (its sum's order
// is the threads').
Tensor index_put_(Tensor& x, const Indices& indices, const Tensor& values, bool accumulate) {
  TORCH_CHECK(!accumulate,
              "portable index_put_: accumulate=True (LibTorch's threads choose its order of sums)");
  for (const std::size_t i : given(indices)) {
    const Tensor index = *indices.get(i);
    if (is_mask(index)) continue;
    TORCH_CHECK(std::get<0>(at::_unique(index.flatten())).numel() == index.numel(),
                "portable index_put_: an integer index that repeats a position");
  }
  const Tensor selected = at::index(x.detach(), indices);
  return x.index_put_(indices, portable::broadcast_to(values, selected.sizes()), false);
}

}  // namespace

TORCH_LIBRARY_IMPL(veritrain, CompositeImplicitAutograd, m) {
  m.impl("index", &index);
  m.impl("index_put_", &index_put_);
  m.impl("expand_as", [](const Tensor& x, const Tensor& other) {
    return portable::broadcast_to(x, other.sizes());
  });
}

}  // namespace vt::training
