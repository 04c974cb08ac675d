#pragma once
// What a training recipe resolves from the model before a task is written (docs/task.md,
// "Recipes"): the parameters spared weight decay. Torch-free: it reads Trainer::parameter_info().

#include <string>
#include <vector>

#include "common/result.h"
#include "training/trainer.h"

namespace vt::training {

// The sorted names optimizer.no_decay commits for `rule`:
//   1d             every parameter with fewer than 2 dimensions (biases, norm weights): nanoGPT's
//                  and timm's rule
//   norm_and_bias  every parameter named bias or *.bias, and every parameter of a normalisation
//                  module (a class whose name holds "Norm": LayerNorm, BatchNorm2d, GroupNorm)
//   P[,P...]       the parameters whose names match any of the glob patterns (fnmatch), each of
//                  which must match one
Result<std::vector<std::string>> resolve_no_decay(const std::string& rule,
                                                  const std::vector<ParameterInfo>& params);

}  // namespace vt::training
