// The veritrain:: operators of indexing (docs/portable.md, "Indexing"): selections and
// assignments that round nothing, whose gradients are portable where LibTorch's would sum in an
// order of its threads' choosing. Registered beside script/operators.cpp's.
#include <torch/library.h>

#include <tuple>
#include <vector>

#include "kernels/reduce.h"
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

// nn.EmbeddingBag (F.embedding_bag's aten::embedding_bag.padding_idx): the embedding's rows of each
// bag (offsets[b] to the next offset), without those of padding_idx, reduced over the bag: a
// portable sum (times per_sample_weights first, in sum mode), that sum ⊘ the bag's row count in
// mean mode, the portable amax in max mode; an empty bag gives zeros. Returns the output and
// LibTorch's bookkeeping (offset2bag, bag_size; max_indices are not kept).
std::tuple<Tensor, Tensor, Tensor, Tensor> embedding_bag(
    const Tensor& weight, const Tensor& indices, const Tensor& offsets, bool scale_grad_by_freq,
    int64_t mode, bool sparse, const c10::optional<Tensor>& per_sample_weights,
    bool include_last_offset, c10::optional<int64_t> padding_idx) {
  TORCH_CHECK(!scale_grad_by_freq && !sparse,
              "portable embedding_bag: scale_grad_by_freq and sparse have no portable kernel");
  TORCH_CHECK(mode >= 0 && mode <= 2, "portable embedding_bag: mode ", mode);
  TORCH_CHECK(!per_sample_weights.has_value() || mode == 0,
              "portable embedding_bag: per_sample_weights in sum mode only, as PyTorch's");
  TORCH_CHECK(indices.dim() == 1 && offsets.dim() == 1,
              "portable embedding_bag: 1-d indices and offsets (F.embedding_bag flattens a 2-d "
              "input)");
  const Tensor ids = indices.to(at::kLong).contiguous();
  const int64_t n = ids.numel();
  const Tensor bounds = offsets.to(at::kLong).contiguous();
  std::vector<int64_t> starts(bounds.data_ptr<int64_t>(),
                              bounds.data_ptr<int64_t>() + bounds.numel());
  if (!include_last_offset) starts.push_back(n);
  const int64_t bags = static_cast<int64_t>(starts.size()) - 1;
  Tensor rows = portable::embedding(ids, weight);
  if (per_sample_weights.has_value()) rows = at::mul(rows, per_sample_weights->unsqueeze(1));
  std::vector<Tensor> out;
  Tensor offset2bag = at::zeros({n}, ids.options()), bag_size = at::zeros({bags}, ids.options());
  for (int64_t b = 0; b < bags; ++b) {
    TORCH_CHECK(starts[b] >= 0 && starts[b] <= starts[b + 1] && starts[b + 1] <= n,
                "portable embedding_bag: offsets ", offsets, " for ", n, " indices");
    Tensor bag = rows.narrow(0, starts[b], starts[b + 1] - starts[b]);
    if (padding_idx.has_value() && *padding_idx >= 0) {
      const Tensor keep = ids.narrow(0, starts[b], starts[b + 1] - starts[b]) != *padding_idx;
      bag = bag.index({keep});
    }
    const int64_t count = bag.size(0);
    offset2bag.narrow(0, starts[b], starts[b + 1] - starts[b]).fill_(b);
    bag_size[b] = count;
    if (count == 0) {
      out.push_back(at::zeros({weight.size(1)}, weight.options()));
    } else if (mode == 2) {
      out.push_back(portable::reduce(bag, {0}, false, kernels::Reduction::kAmax));
    } else {
      const Tensor sum = portable::reduce(bag, {0}, false, kernels::Reduction::kSum);
      out.push_back(mode == 1 ? at::div(sum, static_cast<double>(count)) : sum);
    }
  }
  const Tensor output =
      bags == 0 ? at::zeros({0, weight.size(1)}, weight.options()) : at::stack(out);
  return {output, offset2bag, bag_size, at::zeros({bags}, ids.options())};
}

}  // namespace

TORCH_LIBRARY_IMPL(veritrain, CompositeImplicitAutograd, m) {
  m.impl("embedding_bag", &embedding_bag);
  m.impl("index", &index);
  m.impl("index_put_", &index_put_);
  m.impl("expand_as", [](const Tensor& x, const Tensor& other) {
    return portable::broadcast_to(x, other.sizes());
  });
}

}  // namespace vt::training
