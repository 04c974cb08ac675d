#pragma once
// Between live tensors and canonical bytes: capture, restore and device-side gathering.
// Internal to training/ (includes ATen).

#include <span>

#include "common/safetensors.h"
#include "training/model/network.h"
#include "training/trainer.h"

namespace vt::training {

Result<DType> to_dtype(at::ScalarType type, const std::string& name);
at::ScalarType to_scalar_type(DType dtype);
std::vector<TensorSpec> tensor_specs(const NamedTensors& tensors);

// Canonical safetensors bytes of `tensors`: one host buffer, each tensor copied into its place.
Result<Bytes> encode_snapshot(const NamedTensors& tensors, const Metadata& metadata);
// The same bytes into `out`, reusing its memory: when `out` already has the snapshot's size
// nothing is allocated or zero-filled.
Status encode_snapshot_into(const NamedTensors& tensors, const Metadata& metadata, Bytes& out);
// The same bytes, read from `tensors` a range at a time (Trainer::CanonicalSource).
Result<std::unique_ptr<Trainer::CanonicalSource>> live_canonical_source(const NamedTensors& tensors,
                                                                        const Metadata& metadata);

// Copies every tensor of `view` into the live tensor of the same name. The set of names, their
// dtypes and shapes must match exactly (RNG states excepted: "rng/cuda" may be absent or extra
// when a tolerance-mode replay changes device class), else the error names the tensor.
Status load_state(const SafetensorsView& view, const NamedTensors& live, const at::Device& device);

// Raw bytes of tensors[i].flatten()[indices[i]], gathered on the tensors' device (all on one):
// one index upload, one download per dtype.
Result<std::vector<Bytes>> gather_values_many(
    const std::vector<at::Tensor>& tensors,
    const std::vector<std::span<const std::uint64_t>>& indices,
    const std::vector<std::string>& names);

}  // namespace vt::training
