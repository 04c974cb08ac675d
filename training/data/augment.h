#pragma once
// Image augmentation of training examples (docs/datasets.md, "Augmentation"): what torchvision's
// RandomCrop(size = the image's, padding, padding_mode) then RandomHorizontalFlip(0.5) do, with
// the draws taken from the task's PRNG per example, so a replay, a rank or the numpy reference
// draws the same. Only data movement: a pixel is copied or is +0.0, so the arithmetic mode does
// not matter and no bit depends on the machine.

#include <cstdint>
#include <string>

#include "common/result.h"
#include "protocol/task.h"

namespace vt::training {

struct AugmentDraw {
  std::int64_t top = 0, left = 0;  // the crop's corner in the padded image, each in [0, 2P]
  bool flip = false;
};

// The draws of the example at `position` (0-based) in epoch `epoch`'s order: from the stream
// (seed, 7, (epoch << 32) ^ position), top then left by below(2P + 1) when P > 0, then the flip
// by below(2) == 1 when flips are on.
AugmentDraw augment_draw(const AugmentSpec& spec, std::uint64_t seed, std::int64_t epoch,
                         std::int64_t position);

// One [C, H, W] float image, augmented into `out` (another buffer of the same size).
void augment_image(const AugmentSpec& spec, const AugmentDraw& draw, std::int64_t channels,
                   std::int64_t height, std::int64_t width, const float* in, float* out);

// Whether examples of `shape` (one example's, without the batch) can be augmented by `spec`:
// [C, H, W], and reflection needs padding < H and < W. The message names the field.
Status check_augmentable(const AugmentSpec& spec, const std::vector<std::int64_t>& shape);

}  // namespace vt::training
