#include "training/internal/snapshot.h"

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <cstring>
#include <map>
#include <set>

namespace vt::training {
namespace {

at::Generator generator_for(const std::string& name, const at::Device& device) {
  if (name == "rng/cpu") return at::globalContext().defaultGenerator(at::kCPU);
  return at::globalContext().defaultGenerator(
      at::Device(at::kCUDA, device.has_index() ? device.index() : 0));
}

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i > 0) out += ',';
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

}  // namespace

at::ScalarType to_scalar_type(DType dtype) {
  switch (dtype) {
    case DType::kF64:
      return at::kDouble;
    case DType::kF32:
      return at::kFloat;
    case DType::kF16:
      return at::kHalf;
    case DType::kBF16:
      return at::kBFloat16;
    case DType::kI64:
      return at::kLong;
    case DType::kI32:
      return at::kInt;
    case DType::kI16:
      return at::kShort;
    case DType::kI8:
      return at::kChar;
    case DType::kU8:
      return at::kByte;
    case DType::kBool:
      return at::kBool;
  }
  return at::kFloat;
}

Result<DType> to_dtype(at::ScalarType type, const std::string& name) {
  switch (type) {
    case at::kDouble:
      return DType::kF64;
    case at::kFloat:
      return DType::kF32;
    case at::kHalf:
      return DType::kF16;
    case at::kBFloat16:
      return DType::kBF16;
    case at::kLong:
      return DType::kI64;
    case at::kInt:
      return DType::kI32;
    case at::kShort:
      return DType::kI16;
    case at::kChar:
      return DType::kI8;
    case at::kByte:
      return DType::kU8;
    case at::kBool:
      return DType::kBool;
    default:
      return invalid_input("tensor \"" + name + "\" has a dtype snapshots cannot hold");
  }
}

std::vector<TensorSpec> tensor_specs(const NamedTensors& tensors) {
  std::vector<TensorSpec> specs;
  for (const auto& [name, t] : tensors) {
    auto dtype = to_dtype(t.scalar_type(), name);
    specs.push_back({name, dtype.ok() ? *dtype : DType::kU8, t.sizes().vec()});
  }
  return specs;
}

Result<Bytes> encode_snapshot(const NamedTensors& tensors, const Metadata& metadata) {
  Bytes out;
  VT_RETURN_IF_ERROR(encode_snapshot_into(tensors, metadata, out));
  return out;
}

Status encode_snapshot_into(const NamedTensors& tensors, const Metadata& metadata, Bytes& out) {
  for (const auto& [name, t] : tensors) VT_RETURN_IF_ERROR(to_dtype(t.scalar_type(), name));
  VT_ASSIGN_OR_RETURN(CanonicalLayout layout, plan_canonical(tensor_specs(tensors), metadata));
  // Every byte is written below (prefix, then tensors that tile the data section), so a reused
  // buffer of the same size needs no clearing.
  if (out.capacity() < layout.total_size) {
    // The header grows by a few bytes as the epoch and cursor in its metadata gain digits;
    // slack keeps a recycled buffer from being reallocated (and its old bytes copied) for that.
    out.clear();
    out.reserve(layout.total_size + 4096);
  }
  out.resize(layout.total_size);
  std::memcpy(out.data(), layout.prefix.data(), layout.prefix.size());
  std::map<std::string_view, const TensorEntry*> by_name;
  for (const TensorEntry& e : layout.tensors) by_name[e.name] = &e;
  for (const auto& [name, t] : tensors) {
    const TensorEntry& e = *by_name.at(name);
    at::Tensor host = t.detach().to(at::kCPU).contiguous();
    if (e.nbytes() > 0)
      std::memcpy(out.data() + layout.data_start() + e.begin, host.data_ptr(), e.nbytes());
  }
  return {};
}

namespace {

// Reads from the tensors themselves: host tensors by pointer, device ones a range at a time.
class LiveSource final : public Trainer::CanonicalSource {
 public:
  LiveSource(CanonicalLayout layout, std::vector<at::Tensor> by_entry)
      : layout_(std::move(layout)), tensors_(std::move(by_entry)) {}
  const CanonicalLayout& layout() const override { return layout_; }

  Status read(std::uint64_t offset, std::span<std::uint8_t> out) const override {
    if (offset > layout_.total_size || out.size() > layout_.total_size - offset)
      return internal_error("snapshot source: a read past the snapshot's end");
    const std::uint64_t end = offset + out.size();
    const std::uint64_t data = layout_.data_start();
    if (offset < data) {
      const std::uint64_t n = std::min(end, data) - offset;
      std::memcpy(out.data(), layout_.prefix.data() + offset, n);
    }
    for (std::size_t i = 0; i < layout_.tensors.size(); ++i) {
      const TensorEntry& e = layout_.tensors[i];
      const std::uint64_t from = std::max(offset, data + e.begin);
      const std::uint64_t to = std::min(end, data + e.end);
      if (from >= to) continue;
      copy_bytes(tensors_[i], from - data - e.begin, to - from, out.data() + (from - offset));
    }
    return {};
  }

 private:
  static void copy_bytes(const at::Tensor& t, std::uint64_t first, std::uint64_t n,
                         std::uint8_t* into) {
    if (t.device().is_cpu()) {
      std::memcpy(into, static_cast<const std::uint8_t*>(t.data_ptr()) + first, n);
      return;
    }
    // The elements covering the range, copied to the host (a range need not start on one).
    const auto width = static_cast<std::uint64_t>(t.element_size());
    const std::uint64_t lo = first / width, hi = (first + n + width - 1) / width;
    at::Tensor host =
        t.reshape({-1})
            .narrow(0, static_cast<std::int64_t>(lo), static_cast<std::int64_t>(hi - lo))
            .to(at::kCPU)
            .contiguous();
    std::memcpy(into, static_cast<const std::uint8_t*>(host.data_ptr()) + (first - lo * width), n);
  }

  CanonicalLayout layout_;
  std::vector<at::Tensor> tensors_;  // layout_.tensors[i]'s, contiguous where on the host
};

}  // namespace

Result<std::unique_ptr<Trainer::CanonicalSource>> live_canonical_source(const NamedTensors& tensors,
                                                                        const Metadata& metadata) {
  for (const auto& [name, t] : tensors) VT_RETURN_IF_ERROR(to_dtype(t.scalar_type(), name));
  VT_ASSIGN_OR_RETURN(CanonicalLayout layout, plan_canonical(tensor_specs(tensors), metadata));
  std::map<std::string_view, at::Tensor> by_name;
  for (const auto& [name, t] : tensors) {
    at::Tensor held = t.detach();
    // A host tensor that is not one block is copied once here; parameters and moments are.
    if (held.device().is_cpu() && !held.is_contiguous()) held = held.contiguous();
    by_name[name] = held;
  }
  std::vector<at::Tensor> ordered;
  ordered.reserve(layout.tensors.size());
  for (const TensorEntry& e : layout.tensors) ordered.push_back(by_name.at(e.name));
  return std::unique_ptr<Trainer::CanonicalSource>(
      new LiveSource(std::move(layout), std::move(ordered)));
}

Status load_state(const SafetensorsView& view, const NamedTensors& live, const at::Device& device) {
  c10::NoGradGuard no_grad;
  std::set<std::string> expected;
  for (const auto& [name, t] : live) {
    expected.insert(name);
    const TensorEntry* e = view.find(name);
    const bool rng = name.rfind("rng/", 0) == 0;
    if (e == nullptr) {
      if (name == "rng/cuda") continue;  // a CPU snapshot replayed on CUDA (tolerance mode)
      return invalid_input("snapshot: tensor \"" + name +
                           "\" is missing (a snapshot of another model or optimizer?)");
    }
    VT_ASSIGN_OR_RETURN(DType dtype, to_dtype(t.scalar_type(), name));
    if (e->dtype != dtype || (!rng && e->shape != t.sizes().vec())) {
      return invalid_input("snapshot: tensor \"" + name + "\" is " +
                           std::string(dtype_name(e->dtype)) + shape_text(e->shape) +
                           ", this task's model needs " + std::string(dtype_name(dtype)) +
                           shape_text(t.sizes().vec()));
    }
    ByteSpan bytes = view.data(*e);
    at::Tensor host = at::empty(e->shape, at::TensorOptions().dtype(to_scalar_type(e->dtype)));
    if (!bytes.empty()) std::memcpy(host.data_ptr(), bytes.data(), bytes.size());
    if (rng) {
      at::Generator gen = generator_for(name, device);
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(host);
    } else {
      at::Tensor target = t;
      target.copy_(host);
    }
  }
  for (const TensorEntry& e : view.tensors) {
    if (!expected.count(e.name) && e.name != "rng/cuda") {
      return invalid_input("snapshot: unexpected tensor \"" + e.name +
                           "\" (a snapshot of another model or optimizer?)");
    }
  }
  return {};
}

Result<std::vector<Bytes>> gather_values_many(
    const std::vector<at::Tensor>& tensors,
    const std::vector<std::span<const std::uint64_t>>& indices,
    const std::vector<std::string>& names) {
  std::vector<std::int64_t> all;
  for (std::size_t t = 0; t < tensors.size(); ++t) {
    const auto numel = static_cast<std::uint64_t>(tensors[t].numel());
    for (std::uint64_t i : indices[t]) {
      if (i >= numel) {
        return invalid_input("gather: index " + std::to_string(i) + " is outside tensor \"" +
                             names[t] + "\" of " + std::to_string(numel) + " elements");
      }
      all.push_back(static_cast<std::int64_t>(i));
    }
  }
  std::vector<Bytes> out(tensors.size());
  if (tensors.empty()) return out;
  const at::Device device = tensors.front().device();
  at::Tensor index = at::from_blob(all.data(), {static_cast<std::int64_t>(all.size())}, at::kLong)
                         .to(device, /*non_blocking=*/false, /*copy=*/true);
  // Group by dtype so each group is one contiguous device buffer and one copy to the host.
  std::map<at::ScalarType, std::vector<std::size_t>> groups;
  for (std::size_t t = 0; t < tensors.size(); ++t) groups[tensors[t].scalar_type()].push_back(t);
  std::vector<std::int64_t> offset(tensors.size() + 1, 0);
  for (std::size_t t = 0; t < tensors.size(); ++t)
    offset[t + 1] = offset[t] + static_cast<std::int64_t>(indices[t].size());
  for (const auto& [type, members] : groups) {
    std::vector<at::Tensor> parts;
    for (std::size_t t : members) {
      at::Tensor idx = index.narrow(0, offset[t], offset[t + 1] - offset[t]);
      parts.push_back(tensors[t].detach().reshape({-1}).index_select(0, idx));
    }
    at::Tensor host = at::cat(parts).to(at::kCPU).contiguous();
    const auto* base = static_cast<const std::uint8_t*>(host.data_ptr());
    const std::size_t width = host.element_size();
    std::size_t at_byte = 0;
    for (std::size_t t : members) {
      const std::size_t n = indices[t].size() * width;
      out[t].assign(base + at_byte, base + at_byte + n);
      at_byte += n;
    }
  }
  return out;
}

}  // namespace vt::training
