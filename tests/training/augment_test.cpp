// Augmentation (docs/datasets.md, "Augmentation") against its definition worked by hand on a
// 1 x 3 x 4 image: zero and reflect padding, the flip, the draws' stream and their bounds.
#include "training/data/augment.h"

#include <gtest/gtest.h>

#include <bit>
#include <set>
#include <vector>

#include "training/zoo/prng.h"

namespace vt::training {
namespace {

// Values 1..12: row y, column x holds 4y + x + 1.
std::vector<float> image() {
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[static_cast<std::size_t>(i)] = static_cast<float>(i + 1);
  return v;
}

std::vector<float> augmented(const AugmentSpec& spec, const AugmentDraw& draw) {
  std::vector<float> out(12, -7.0f);
  augment_image(spec, draw, 1, 3, 4, image().data(), out.data());
  return out;
}

TEST(Augment, ZeroPaddingShiftsAndFillsWithPositiveZero) {
  const AugmentSpec spec{1, "zero", false};
  // top 0, left 2 of a padding of 1: one row down (a zero row first), one column left.
  const std::vector<float> got = augmented(spec, {0, 2, false});
  EXPECT_EQ(got, (std::vector<float>{0, 0, 0, 0, 2, 3, 4, 0, 6, 7, 8, 0}));
  for (float v : got) {
    if (v == 0.0f) {
      EXPECT_EQ(std::bit_cast<std::uint32_t>(v), 0u);  // +0.0, never -0.0
    }
  }
  // The centre (top = left = P) is the image itself.
  EXPECT_EQ(augmented(spec, {1, 1, false}), image());
}

TEST(Augment, ReflectionMirrorsWithoutRepeatingTheEdge) {
  const AugmentSpec spec{2, "reflect", false};
  // top 0, left 0: padded row -2 is row 2, row -1 is row 1; column -2 is column 2, -1 column 1.
  EXPECT_EQ(augmented(spec, {0, 0, false}),
            (std::vector<float>{11, 10, 9, 10, 7, 6, 5, 6, 3, 2, 1, 2}));
  // top 4, left 4: rows 2, 3 -> 1, 4 -> 0; columns 2, 3, 4 -> 2, 5 -> 1.
  EXPECT_EQ(augmented(spec, {4, 4, false}),
            (std::vector<float>{11, 12, 11, 10, 7, 8, 7, 6, 3, 4, 3, 2}));
}

TEST(Augment, FlipReversesTheCropsColumns) {
  EXPECT_EQ(augmented({0, "zero", true}, {0, 0, true}),
            (std::vector<float>{4, 3, 2, 1, 8, 7, 6, 5, 12, 11, 10, 9}));
  // Crop first, then flip: the zero column the crop brings in ends up on the other side.
  EXPECT_EQ(augmented({1, "zero", true}, {1, 2, true}),
            (std::vector<float>{0, 4, 3, 2, 0, 8, 7, 6, 0, 12, 11, 10}));
}

TEST(Augment, DrawsAreTheDocumentedStreamWithinTheirBounds) {
  const AugmentSpec both{4, "zero", true};
  std::set<std::int64_t> tops;
  int flips = 0;
  for (std::int64_t i = 0; i < 400; ++i) {
    const AugmentDraw d = augment_draw(both, 99, 3, i);
    Prng prng(99, 7, (std::uint64_t{3} << 32) ^ static_cast<std::uint64_t>(i));
    EXPECT_EQ(d.top, static_cast<std::int64_t>(prng.below(9)));
    EXPECT_EQ(d.left, static_cast<std::int64_t>(prng.below(9)));
    EXPECT_EQ(d.flip, prng.below(2) == 1);
    tops.insert(d.top);
    flips += d.flip ? 1 : 0;
  }
  EXPECT_EQ(tops, (std::set<std::int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
  EXPECT_GT(flips, 150);
  EXPECT_LT(flips, 250);
  // Flips alone draw nothing for the crop: the flip is the stream's first draw.
  const AugmentDraw only_flip = augment_draw({0, "zero", true}, 99, 3, 5);
  Prng first(99, 7, (std::uint64_t{3} << 32) ^ 5u);
  EXPECT_EQ(only_flip.flip, first.below(2) == 1);
  EXPECT_EQ(only_flip.top, 0);
  // Another epoch, another draw for the same position.
  int same = 0;
  for (std::int64_t i = 0; i < 64; ++i)
    same += augment_draw(both, 99, 3, i).top == augment_draw(both, 99, 4, i).top ? 1 : 0;
  EXPECT_LT(same, 32);
}

TEST(Augment, RefusesWhatIsNotAnImageOrTooSmallToReflect) {
  EXPECT_TRUE(check_augmentable({}, {32}).ok());  // nothing to do: anything goes
  auto flat = check_augmentable({0, "zero", true}, {32});
  ASSERT_FALSE(flat.ok());
  EXPECT_EQ(flat.error().message,
            "dataset.augment: applies to images of shape [C, H, W]; this task's examples are [32]");
  EXPECT_TRUE(check_augmentable({3, "zero", false}, {3, 2, 2}).ok());  // zeros need no size
  auto small = check_augmentable({3, "reflect", false}, {3, 8, 3});
  ASSERT_FALSE(small.ok());
  EXPECT_EQ(small.error().message,
            "dataset.augment.crop_padding: reflection needs a padding below the image's height "
            "and width (examples [3, 8, 3], padding 3)");
}

}  // namespace
}  // namespace vt::training
