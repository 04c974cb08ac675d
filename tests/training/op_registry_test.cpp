// The operator table (training/script/op_table.h) against LibTorch's registry: each entry names
// an operator and overload LibTorch has, and each rewrite's veritrain:: operator is registered
// with a kernel and takes the arguments of the operator it replaces (a rewritten node keeps its
// inputs and outputs).
#include <ATen/core/dispatch/Dispatcher.h>
#include <gtest/gtest.h>
#include <torch/csrc/jit/runtime/operator.h>
#include <torch/jit.h>

#include <algorithm>
#include <string>

#include "training/script/op_table.h"

namespace vt::training {
namespace {

// decompositions.py as the rewrite compiles it.
const torch::jit::CompilationUnit& decompositions() {
  static const auto unit = torch::jit::compile(std::string(decomposition_source()));
  return *unit;
}

// LibTorch 2.x's aten schemas say SymInt where veritrain's say int: the same value in a script.
c10::TypeKind kind_of(const c10::TypePtr& type) {
  return type->kind() == c10::TypeKind::SymIntType ? c10::TypeKind::IntType : type->kind();
}

TEST(OpRegistry, EveryEntryIsAnOperatorOfLibTorchAndEveryRewriteFitsIt) {
  for (const PortableOp& op : portable_ops()) {
    const auto candidates =
        torch::jit::getAllOperatorsFor(c10::Symbol::fromQualString(std::string(op.aten)));
    ASSERT_FALSE(candidates.empty()) << op.aten << ": LibTorch has no such operator";
    if (op.overload == kAnyOverload) continue;
    const auto aten = std::find_if(candidates.begin(), candidates.end(), [&](const auto& o) {
      return o->schema().overload_name() == op.overload;
    });
    ASSERT_NE(aten, candidates.end()) << op.aten << " has no overload \"" << op.overload << "\"";
    if (op.form == OpForm::kDecomposition) {
      // Its function takes the operator's arguments, in order (the rewrite checks types).
      const auto& function = decompositions().get_function(std::string(op.ours));
      EXPECT_EQ(function.getSchema().arguments().size(), (*aten)->schema().arguments().size())
          << op.aten << " against decompositions.py's " << op.ours;
      continue;
    }
    const auto ours =
        c10::Dispatcher::singleton().findSchema({"veritrain::" + std::string(op.ours), ""});
    ASSERT_TRUE(ours.has_value()) << "veritrain::" << op.ours << " is not registered";
    EXPECT_TRUE(ours->hasKernelForDispatchKey(c10::DispatchKey::CompositeImplicitAutograd))
        << "veritrain::" << op.ours << " has no kernel (an m.impl in script/operators.cpp)";
    const auto& want = (*aten)->schema();
    const auto& have = ours->schema();
    ASSERT_EQ(want.arguments().size(), have.arguments().size())
        << op.aten << "." << op.overload << " against veritrain::" << op.ours;
    for (std::size_t i = 0; i < want.arguments().size(); ++i) {
      EXPECT_EQ(kind_of(want.arguments()[i].type()), kind_of(have.arguments()[i].type()))
          << op.aten << "." << op.overload << " argument " << want.arguments()[i].name()
          << " against veritrain::" << op.ours << "'s " << have.arguments()[i].name();
    }
    EXPECT_EQ(want.returns().size(), have.returns().size()) << op.aten;
  }
}

}  // namespace
}  // namespace vt::training
