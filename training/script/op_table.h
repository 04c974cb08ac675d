#pragma once
// The operators a portable TorchScript module may run (docs/portable.md, "TorchScript modules"),
// one entry each. script/rewrite.cpp builds its rewrite and its refusals from this table,
// script/operators.cpp registers the veritrain:: schemas from it, and
// tests/training/op_table_test.cpp checks it against LibTorch's registry, the docs and the
// referee. Adding an operator is one entry here plus its kernel or composition (the m.impl of
// its veritrain:: operator). Torch-free: a table of names.

#include <span>
#include <string_view>

namespace vt::training {

enum class OpForm {
  kKernel,       // rewritten onto veritrain::<ours>: portable kernels (portable/)
  kComposition,  // rewritten onto veritrain::<ours>: portable kernels and exact operations
  kInPlace,      // an in-place form, run as veritrain::<ours> out of place where what it changes
                 // is used nowhere else
  kExact,        // LibTorch's own: rounds nothing or one IEEE operation per element
  kMove,         // LibTorch's own: moves values; its gradient is the inverse move
  // A function of training/script/decompositions.py (<ours>) inlined in its place: operators
  // of this table, whose backwards are its backward
  kDecomposition,
};

struct PortableOp {
  std::string_view aten;      // qualified name, "aten::relu"
  std::string_view overload;  // the overload it covers ("" the unnamed one, "*" every one)
  OpForm form;
  // veritrain::<ours> for kKernel, kComposition, kInPlace; the function for kDecomposition
  std::string_view ours;
  std::string_view schema;  // ours' schema, on the first entry that names ours
  std::string_view doc;     // docs/portable.md's heading or bold paragraph defining its arithmetic
  // The kernels' operators its forward and backward put in a step trace (docs/dispute.md), each
  // recomputed by the referee; space-separated, "" for LibTorch's own.
  std::string_view traced;
  // The kernel takes the operator's alpha as a parameter of its own (elu's, celu's), rather
  // than as a product before a sum that is refused unless it is 1.
  bool own_alpha = false;
};

inline constexpr std::string_view kAnyOverload = "*";

std::span<const PortableOp> portable_ops();

// training/script/decompositions.py as built in, for TorchScript to compile: its import lines
// are empty.
std::string_view decomposition_source();

}  // namespace vt::training
