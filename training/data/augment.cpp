#include "training/data/augment.h"

#include "training/zoo/prng.h"

namespace vt::training {
namespace {

// torch.nn.functional.pad's "reflect": the edge is not repeated (-1 reads 1, n reads n - 2).
std::int64_t reflected(std::int64_t i, std::int64_t n) {
  if (i < 0) return -i;
  if (i >= n) return 2 * (n - 1) - i;
  return i;
}

}  // namespace

AugmentDraw augment_draw(const AugmentSpec& spec, std::uint64_t seed, std::int64_t epoch,
                         std::int64_t position) {
  Prng prng(seed, 7,
            (static_cast<std::uint64_t>(epoch) << 32) ^ static_cast<std::uint64_t>(position));
  AugmentDraw d;
  if (spec.crop_padding > 0) {
    const auto span = static_cast<std::uint64_t>(2 * spec.crop_padding + 1);
    d.top = static_cast<std::int64_t>(prng.below(span));
    d.left = static_cast<std::int64_t>(prng.below(span));
  }
  if (spec.flip) d.flip = prng.below(2) == 1;
  return d;
}

void augment_image(const AugmentSpec& spec, const AugmentDraw& draw, std::int64_t channels,
                   std::int64_t height, std::int64_t width, const float* in, float* out) {
  const std::int64_t pad = spec.crop_padding;
  const bool reflect = spec.padding_mode == "reflect";
  for (std::int64_t c = 0; c < channels; ++c) {
    const float* plane = in + c * height * width;
    float* to = out + c * height * width;
    for (std::int64_t y = 0; y < height; ++y) {
      // Row y of the crop is row top + y of the padded image, row top + y - P of the image.
      std::int64_t sy = draw.top + y - pad;
      const bool row_outside = sy < 0 || sy >= height;
      if (row_outside && reflect) sy = reflected(sy, height);
      for (std::int64_t x = 0; x < width; ++x) {
        // The flip mirrors the crop: column x reads the crop's column W - 1 - x.
        const std::int64_t cx = draw.flip ? width - 1 - x : x;
        std::int64_t sx = draw.left + cx - pad;
        const bool outside = row_outside || sx < 0 || sx >= width;
        if (outside && !reflect) {
          to[y * width + x] = 0.0f;
          continue;
        }
        if (reflect) sx = reflected(sx, width);
        to[y * width + x] = plane[sy * width + sx];
      }
    }
  }
}

Status check_augmentable(const AugmentSpec& spec, const std::vector<std::int64_t>& shape) {
  if (!spec.any()) return {};
  std::string got = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) got += (i ? ", " : "") + std::to_string(shape[i]);
  got += "]";
  if (shape.size() != 3)
    return invalid_input(
        "dataset.augment: applies to images of shape [C, H, W]; this task's examples are " + got);
  if (spec.padding_mode == "reflect" &&
      (spec.crop_padding >= shape[1] || spec.crop_padding >= shape[2]))
    return invalid_input(
        "dataset.augment.crop_padding: reflection needs a padding below the "
        "image's height and width (examples " +
        got + ", padding " + std::to_string(spec.crop_padding) + ")");
  return {};
}

}  // namespace vt::training
