#pragma once
// The upper levels of the gradient-group tree, across ranks (docs/training.md, "Gradient
// groups"). Internal to training/ (includes ATen).

#include <ATen/ATen.h>

#include "training/distributed.h"

namespace vt::training {

// `flat` holds this rank's sum over its own groups (one node of the tree); on return it holds
// the root, the sum over every rank, bit-identical on all of them. Recursive-halving
// reduce-scatter then recursive-doubling all-gather, pairing rank r with r XOR 2^l at level l.
// A CUDA tensor is exchanged through a host copy. Throws on a peer's failure or timeout
// (callers run under Trainer's guarded(), which turns that into an Error).
void tree_allreduce(Collective& collective, at::Tensor& flat);

}  // namespace vt::training
