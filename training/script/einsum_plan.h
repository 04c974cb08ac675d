#pragma once
// torch.einsum's equation as portable operations (docs/portable.md, "Einsum"): sums of the
// subscripts one operand alone names and the output drops, moves, and one batched product whose
// chain runs over the contracted subscripts in the order the first operand names them. The plan
// is worked out from the equation and the operands' shapes alone; script/einsum.cpp runs it.
// Torch-free, for the torch-free tests.

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace vt::training {

struct EinsumPlan {
  std::size_t operands = 0;  // 1 or 2
  // Each operand's dimensions summed first (ascending): subscripts the other operand and the
  // output do not name.
  std::vector<std::int64_t> a_sum, b_sum;
  // Over the dimensions left after the sums: the first operand's into [batch, left, contracted]
  // and the second's into [batch, contracted, right] (two operands).
  std::vector<std::int64_t> a_perm, b_perm;
  std::size_t batch = 0, left = 0, contracted = 0, right = 0;  // subscripts of each kind
  // The result's dimensions ([batch, left, right] of the product; one operand: what the sums
  // left) into the output's order.
  std::vector<std::int64_t> out_perm;
};

// `shapes`: each operand's sizes. Invalid input, naming the subscript or operand, for what the
// portable form does not cover: an ellipsis, a subscript repeated within an operand (a
// diagonal), sizes that differ (broadcasting), more than two operands.
Result<EinsumPlan> plan_einsum(std::string_view equation,
                               const std::vector<std::vector<std::int64_t>>& shapes);

}  // namespace vt::training
