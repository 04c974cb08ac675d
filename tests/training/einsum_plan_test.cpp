// torch.einsum's equations as portable operations (training/script/einsum_plan.h): which
// subscripts are batches, kept, contracted or summed, and the moves around the one product;
// what the portable form does not cover is refused by name. Torch-free; the operator itself
// trains in tests/cli/real_models_test.cpp and the census.
#include "training/script/einsum_plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace vt::training {
namespace {

using Dims = std::vector<std::int64_t>;

EinsumPlan planned(const std::string& equation, const std::vector<Dims>& shapes) {
  auto plan = plan_einsum(equation, shapes);
  EXPECT_TRUE(plan.ok()) << equation << ": " << (plan.ok() ? "" : plan.error().message);
  return plan.ok() ? *plan : EinsumPlan{};
}

std::string refusal(const std::string& equation, const std::vector<Dims>& shapes) {
  auto plan = plan_einsum(equation, shapes);
  EXPECT_FALSE(plan.ok()) << equation;
  return plan.ok() ? std::string() : plan.error().message;
}

TEST(EinsumPlan, MaxVitsAttentionIsABatchedProduct) {
  // torchvision's MaxViT: q·kᵀ over D, then the weights times v over J, with spaces.
  const EinsumPlan scores =
      planned("B G H I D, B G H J D -> B G H I J", {{2, 3, 4, 5, 6}, {2, 3, 4, 7, 6}});
  EXPECT_EQ(scores.batch, 3u);
  EXPECT_EQ(scores.left, 1u);
  EXPECT_EQ(scores.contracted, 1u);
  EXPECT_EQ(scores.right, 1u);
  EXPECT_EQ(scores.a_perm, (Dims{0, 1, 2, 3, 4}));
  EXPECT_EQ(scores.b_perm, (Dims{0, 1, 2, 4, 3}));
  EXPECT_EQ(scores.out_perm, (Dims{0, 1, 2, 3, 4}));
  EXPECT_TRUE(scores.a_sum.empty() && scores.b_sum.empty());
  const EinsumPlan mixed =
      planned("B G H I J, B G H J D -> B G H I D", {{2, 3, 4, 5, 7}, {2, 3, 4, 7, 6}});
  EXPECT_EQ(mixed.a_perm, (Dims{0, 1, 2, 3, 4}));
  EXPECT_EQ(mixed.b_perm, (Dims{0, 1, 2, 3, 4}));
}

TEST(EinsumPlan, OperandsAndOutputAreMovedIntoTheProductsOrder) {
  // torchaudio's hdemucs: weights [b h t s] and content [b h c t] into [b h c s].
  const EinsumPlan p = planned("bhts,bhct->bhcs", {{2, 3, 4, 5}, {2, 3, 6, 4}});
  EXPECT_EQ(p.a_perm, (Dims{0, 1, 3, 2}));    // b h s | t
  EXPECT_EQ(p.b_perm, (Dims{0, 1, 3, 2}));    // b h t | c
  EXPECT_EQ(p.out_perm, (Dims{0, 1, 3, 2}));  // (b h s c) -> b h c s
  // Several contracted subscripts: the chain runs over them in the first operand's order.
  const EinsumPlan two = planned("ikj,jkl->il", {{2, 3, 4}, {4, 3, 5}});
  EXPECT_EQ(two.contracted, 2u);
  EXPECT_EQ(two.a_perm, (Dims{0, 1, 2}));  // i | k j
  EXPECT_EQ(two.b_perm, (Dims{1, 0, 2}));  // k j | l
}

TEST(EinsumPlan, TheImplicitOutputAndOneOperand) {
  // No arrow: the subscripts named once, A-Z before a-z.
  const EinsumPlan mm = planned("ij,jk", {{2, 3}, {3, 4}});
  EXPECT_EQ(mm.out_perm, (Dims{0, 1}));
  EXPECT_EQ(mm.contracted, 1u);
  EXPECT_EQ(planned("ba", {{2, 3}}).out_perm, (Dims{1, 0}));
  EXPECT_EQ(planned("bA", {{2, 3}}).out_perm, (Dims{1, 0}));
  // One operand: the dropped subscripts summed, the rest moved.
  const EinsumPlan sum = planned("ijk->ki", {{2, 3, 4}});
  EXPECT_EQ(sum.a_sum, (Dims{1}));
  EXPECT_EQ(sum.out_perm, (Dims{1, 0}));
  // A subscript only one operand names and the output drops is summed before the product.
  const EinsumPlan own = planned("ij,jk->k", {{2, 3}, {3, 4}});
  EXPECT_EQ(own.a_sum, (Dims{0}));
  EXPECT_EQ(own.contracted, 1u);
  EXPECT_EQ(own.right, 1u);
  // An outer product: nothing contracted.
  EXPECT_EQ(planned("i,j->ij", {{2}, {3}}).contracted, 0u);
}

TEST(EinsumPlan, WhatThePortableFormDoesNotCoverIsRefusedByName) {
  EXPECT_NE(refusal("...ij,...jk->...ik", {{2, 3}, {3, 4}}).find("ellipsis"), std::string::npos);
  EXPECT_NE(refusal("ii->i", {{3, 3}}).find("'i' twice in operand 1 (a diagonal)"),
            std::string::npos);
  EXPECT_NE(refusal("ij,jk->ik", {{2, 3}, {4, 5}}).find("'j' is 3 and 4 long"), std::string::npos);
  EXPECT_NE(refusal("ij,jk,kl->il", {{2, 3}, {3, 4}, {4, 5}}).find("3 operands"),
            std::string::npos);
  EXPECT_NE(refusal("ij,jk->ik", {{2, 3}}).find("2 terms for 1 operands"), std::string::npos);
  EXPECT_NE(refusal("ijk->i", {{2, 3}}).find("operand 1 has 2 dimensions, 'ijk' names 3"),
            std::string::npos);
  EXPECT_NE(refusal("i1->i", {{2, 3}}).find("'1' is not a subscript"), std::string::npos);
  EXPECT_NE(refusal("ij->ik", {{2, 3}}).find("'k' of the output names no input"),
            std::string::npos);
  EXPECT_NE(refusal("ij->ii", {{2, 3}}).find("'i' twice in the output"), std::string::npos);
}

}  // namespace
}  // namespace vt::training
