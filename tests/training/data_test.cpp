#include "training/data/data.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <set>

#include "common/file_io.h"
#include "common/sha256.h"
#include "tests/test_util.h"
#include "training/data/gunzip.h"
#include "training/zoo/prng.h"
#include "training/zoo/zoo.h"

namespace vt::training {
namespace {

Result<Dataset> load(const Task& task, const std::filesystem::path& dir) {
  VT_ASSIGN_OR_RETURN(const TrainingTask resolved, resolve_options(task));
  return load_dataset(resolved, dir);
}

TEST(Prng, KnownFirstOutputsPinTheStream) {
  // Changing the generator changes every task's data order: these values are part of the format.
  Prng rng(0);
  EXPECT_EQ(rng.next(), 0xe220a8397b1dcdafull);
  EXPECT_EQ(rng.next(), 0x6e789e6aa1b965f4ull);
}

TEST(Prng, BelowIsInRangeAndPermutationIsOne) {
  Prng rng(42, 1, 2);
  for (int i = 0; i < 1000; ++i) EXPECT_LT(rng.below(7), 7u);
  auto p = rng.permutation(100);
  std::set<std::int64_t> seen(p.begin(), p.end());
  EXPECT_EQ(seen.size(), 100u);
  EXPECT_EQ(*seen.begin(), 0);
  EXPECT_EQ(*seen.rbegin(), 99);
}

TEST(Prng, NormalSumsFourUniformsInDrawOrderLeftToRight) {
  // docs/training.md: normal() = (((u1 + u2) + u3) + u4 - 2) * 1.7320508 in float. The float
  // sum rounds, so another order changes about 30% of the values: the order is part of the data.
  Prng rng(7, 1, 1);
  Prng same(7, 1, 1);
  for (int i = 0; i < 1000; ++i) {
    const float u1 = same.uniform(), u2 = same.uniform(), u3 = same.uniform(), u4 = same.uniform();
    const float expected = ((((u1 + u2) + u3) + u4) - 2.0f) * 1.7320508f;
    const float got = rng.normal();
    ASSERT_EQ(std::bit_cast<std::uint32_t>(got), std::bit_cast<std::uint32_t>(expected))
        << "draw " << i;
  }
}

TEST(EpochOrder, DependsOnSeedAndEpochOnly) {
  auto a = *epoch_order(1, 3, 50, 4, 8);
  EXPECT_EQ(a.size(), 32u);
  EXPECT_EQ(a, *epoch_order(1, 3, 50, 4, 8));
  EXPECT_NE(a, *epoch_order(1, 4, 50, 4, 8));
  EXPECT_NE(a, *epoch_order(2, 3, 50, 4, 8));
  EXPECT_NE(order_digest(a), order_digest(*epoch_order(1, 4, 50, 4, 8)));
}

TEST(EpochOrder, MoreStepsThanOnePassContinuesWithFreshPermutations) {
  auto order = *epoch_order(9, 1, 10, 3, 8);  // 24 examples from a dataset of 10
  ASSERT_EQ(order.size(), 24u);
  std::set<std::int64_t> first_pass(order.begin(), order.begin() + 10);
  EXPECT_EQ(first_pass.size(), 10u);
}

// Passes are added until the order is full; over no examples that never happens, so an empty
// dataset of any kind must be an error, not a hang.
TEST(EpochOrder, AnEmptyDatasetIsAnErrorNotAnEndlessLoop) {
  auto order = epoch_order(9, 1, 0, 3, 8);
  ASSERT_FALSE(order.ok());
  EXPECT_EQ(order.error().code, Errc::kInvalidInput);
  EXPECT_NE(order.error().message.find("no examples"), std::string::npos) << order.error().message;
}

TEST(Synthetic, SameTaskSameBytesOtherSeedOtherBytes) {
  Task task = *default_task("gpt", "synthetic");
  auto a = load(task, ".");
  ASSERT_TRUE(a.ok()) << a.error().message;
  EXPECT_EQ(a->size, 256);
  EXPECT_EQ(a->token_inputs, load(task, ".")->token_inputs);
  task.seed = 1;
  EXPECT_NE(a->token_inputs, load(task, ".")->token_inputs);
  // Next-token targets are the inputs shifted by one.
  EXPECT_EQ(a->class_targets[0], a->token_inputs[1]);
}

Bytes be32(std::uint32_t v) {
  return {std::uint8_t(v >> 24), std::uint8_t(v >> 16), std::uint8_t(v >> 8), std::uint8_t(v)};
}

TEST(Mnist, ReadsIdxFilesPinnedBySha256) {
  testing::ScratchDir dir;
  Bytes images = be32(2051), labels = be32(2049);
  for (auto v : {2u, 28u, 28u}) append_bytes(images, be32(v));
  append_bytes(labels, be32(2));
  for (int i = 0; i < 2 * 784; ++i) images.push_back(static_cast<std::uint8_t>(i % 256));
  labels.push_back(3);
  labels.push_back(9);
  ASSERT_TRUE(write_file_atomic(dir / "train-images-idx3-ubyte", images).ok());
  ASSERT_TRUE(write_file_atomic(dir / "train-labels-idx1-ubyte", labels).ok());
  Task task = *default_task("mlp", "mnist");
  task.dataset.path = "data";
  task.dataset.files = {{"train-images-idx3-ubyte", hex_encode(sha256(images))},
                        {"train-labels-idx1-ubyte", hex_encode(sha256(labels))}};
  std::filesystem::rename(dir.path(), dir.path().string() + "-x");
  std::filesystem::create_directories(dir.path());
  std::filesystem::rename(dir.path().string() + "-x", dir / "data");
  auto d = load(task, dir.path());
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->size, 2);
  EXPECT_EQ(d->class_targets, (std::vector<std::int64_t>{3, 9}));
  EXPECT_FLOAT_EQ(d->inputs[255], 1.0f);

  task.dataset.files["train-labels-idx1-ubyte"] = std::string(64, '0');
  auto bad = load(task, dir.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("train-labels-idx1-ubyte: SHA-256 is"), std::string::npos)
      << bad.error().message;
}

// An idx pair that says it holds 0 images is well formed but gives nothing to train on; it must be
// refused as input (plain and gzip'd), not handed to the trainer.
TEST(Mnist, AnEmptyIdxPairIsRefused) {
  testing::ScratchDir dir;
  Bytes images = be32(2051), labels = be32(2049);
  for (auto v : {0u, 28u, 28u}) append_bytes(images, be32(v));
  append_bytes(labels, be32(0));
  ASSERT_TRUE(write_file_atomic(dir / "train-images-idx3-ubyte", images).ok());
  ASSERT_TRUE(write_file_atomic(dir / "train-labels-idx1-ubyte", labels).ok());
  auto gz =
      testing::run_command("cd " + dir.path().string() +
                               " && gzip -nc train-images-idx3-ubyte > train-images-idx3-ubyte.gz"
                               " && gzip -nc train-labels-idx1-ubyte > train-labels-idx1-ubyte.gz",
                           dir.path());
  ASSERT_EQ(gz.exit_code, 0) << gz.err;
  for (const std::string suffix : {"", ".gz"}) {
    Task task = *default_task("mlp", "mnist");
    task.dataset.path = ".";
    for (const char* name : {"train-images-idx3-ubyte", "train-labels-idx1-ubyte"}) {
      task.dataset.files[name + suffix] = hex_encode(sha256(*read_file(dir / (name + suffix))));
    }
    auto d = load(task, dir.path());
    ASSERT_FALSE(d.ok()) << suffix;
    EXPECT_EQ(d.error().code, Errc::kInvalidInput);
    EXPECT_NE(d.error().message.find("train-images-idx3-ubyte: holds no images"), std::string::npos)
        << d.error().message;
  }
}

// A download cut short: real text gzip'd by the real gzip tool, cut inside the header, the
// deflate stream and the trailer, is named as truncated, not as an invalid file.
TEST(Gunzip, AFileCutShortIsNamedTruncated) {
  if (!std::filesystem::exists("/usr/share/games/fortunes/debian"))
    GTEST_SKIP() << "fortunes not installed";
  testing::ScratchDir dir;
  auto gz = testing::run_command(
      "gzip -nc /usr/share/games/fortunes/debian > " + (dir / "debian.gz").string(), dir.path());
  ASSERT_EQ(gz.exit_code, 0) << gz.err;
  const Bytes whole = *read_file(dir / "debian.gz");
  ASSERT_GT(whole.size(), 1000u);
  auto full = gunzip(whole, std::uint64_t{1} << 30, "debian.gz");
  ASSERT_TRUE(full.ok()) << full.error().message;
  EXPECT_EQ(*full, *read_file("/usr/share/games/fortunes/debian"));
  for (std::size_t keep : {std::size_t{5}, whole.size() / 2, whole.size() - 4}) {
    auto cut = gunzip(ByteSpan(whole.data(), keep), std::uint64_t{1} << 30, "debian.gz");
    ASSERT_FALSE(cut.ok()) << keep;
    EXPECT_EQ(cut.error().code, Errc::kInvalidInput);
    EXPECT_NE(cut.error().message.find("debian.gz: truncated gzip file"), std::string::npos)
        << "cut at " << keep << " of " << whole.size() << ": " << cut.error().message;
  }
}

// MNIST as people download it: the same idx files gzip'd (by the real gzip tool), read to the
// same dataset; a file that is not pinned or not there is named.
TEST(Mnist, ReadsGzippedIdxFilesAndNamesAMissingOne) {
  testing::ScratchDir dir;
  Bytes images = be32(2051), labels = be32(2049);
  for (auto v : {3u, 28u, 28u}) append_bytes(images, be32(v));
  append_bytes(labels, be32(3));
  for (int i = 0; i < 3 * 784; ++i) images.push_back(static_cast<std::uint8_t>((i * 7) % 256));
  for (std::uint8_t l : {4, 0, 7}) labels.push_back(l);
  ASSERT_TRUE(write_file_atomic(dir / "train-images-idx3-ubyte", images).ok());
  ASSERT_TRUE(write_file_atomic(dir / "train-labels-idx1-ubyte", labels).ok());
  Task plain = *default_task("mlp", "mnist");
  plain.dataset.path = ".";
  plain.dataset.files = {{"train-images-idx3-ubyte", hex_encode(sha256(images))},
                         {"train-labels-idx1-ubyte", hex_encode(sha256(labels))}};
  auto want = load(plain, dir.path());
  ASSERT_TRUE(want.ok()) << want.error().message;

  auto gz =
      testing::run_command("cd " + dir.path().string() +
                               " && gzip -nc train-images-idx3-ubyte > train-images-idx3-ubyte.gz"
                               " && gzip -nc train-labels-idx1-ubyte > train-labels-idx1-ubyte.gz",
                           dir.path());
  ASSERT_EQ(gz.exit_code, 0) << gz.err;
  Task packed = plain;
  packed.dataset.files.clear();
  for (const char* name : {"train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"}) {
    packed.dataset.files[name] = hex_encode(sha256(*read_file(dir / name)));
  }
  auto got = load(packed, dir.path());
  ASSERT_TRUE(got.ok()) << got.error().message;
  EXPECT_EQ(got->inputs, want->inputs);
  EXPECT_EQ(got->class_targets, (std::vector<std::int64_t>{4, 0, 7}));

  std::filesystem::remove(dir / "train-labels-idx1-ubyte.gz");
  auto missing = load(packed, dir.path());
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, Errc::kInvalidInput);
  EXPECT_NE(missing.error().message.find("file \"train-labels-idx1-ubyte.gz\" is missing"),
            std::string::npos)
      << missing.error().message;
  packed.dataset.files.erase("train-labels-idx1-ubyte.gz");
  auto unpinned = load(packed, dir.path());
  ASSERT_FALSE(unpinned.ok());
  EXPECT_NE(unpinned.error().message.find(
                "pins neither \"train-labels-idx1-ubyte\" nor \"train-labels-idx1-ubyte.gz\""),
            std::string::npos)
      << unpinned.error().message;
}

TEST(Cifar10, ReadsBinaryBatchesAndRejectsTruncation) {
  testing::ScratchDir dir;
  Bytes batch;
  for (int r = 0; r < 3; ++r) {
    batch.push_back(static_cast<std::uint8_t>(r));
    batch.insert(batch.end(), 3072, static_cast<std::uint8_t>(255));
  }
  ASSERT_TRUE(write_file_atomic(dir / "data_batch_1.bin", batch).ok());
  Task task = *default_task("cnn", "cifar10");
  task.dataset.path = ".";
  task.dataset.files = {{"data_batch_1.bin", hex_encode(sha256(batch))}};
  auto d = load(task, dir.path());
  ASSERT_TRUE(d.ok()) << d.error().message;
  EXPECT_EQ(d->size, 3);
  EXPECT_EQ(d->class_targets[2], 2);
  EXPECT_FLOAT_EQ(d->inputs[0], 0.5f);
  batch.pop_back();
  ASSERT_TRUE(write_file_atomic(dir / "data_batch_1.bin", batch).ok());
  task.dataset.files = {{"data_batch_1.bin", hex_encode(sha256(batch))}};
  auto bad = load(task, dir.path());
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("not a CIFAR-10 binary batch"), std::string::npos);
}

}  // namespace
}  // namespace vt::training
