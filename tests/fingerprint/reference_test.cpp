// reference/fingerprint_ref.py, written from docs/fingerprint.md alone, must agree byte for byte
// with this module on roots and fingerprints.

#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "fingerprint/fingerprint.h"
#include "tests/fingerprint/kat.h"
#include "tests/test_util.h"

namespace vt::fp {
namespace {

// A multi-chunk snapshot with every sampled dtype, integer and empty tensors, and names that
// sort differently as bytes than as case-folded text.
Bytes large_snapshot() {
  auto fill = [](std::size_t n, std::uint32_t seed) {
    Bytes out(n);
    for (auto& b : out) b = static_cast<std::uint8_t>((seed = seed * 1103515245u + 12345u) >> 16);
    return out;
  };
  Bytes w = fill(700'000 * 4, 1), h = fill(300'001 * 2, 2), bf = fill(5 * 2, 3),
        d = fill(129 * 8, 4), rng = fill(5056, 5), cursor = fill(8, 6);
  return write_canonical({{{"layers.0.weight", DType::kF32, {700, 1000}}, w},
                          {{"Layers.half", DType::kF16, {300'001}}, h},
                          {{"norm.bias", DType::kBF16, {5}}, bf},
                          {{"optim.m", DType::kF64, {3, 43}}, d},
                          {{"empty", DType::kF32, {0}}, {}},
                          {{"rng_state", DType::kU8, {5056}}, rng},
                          {{"cursor", DType::kI64, {1}}, cursor}},
                         {})
      .value();
}

void expect_reference_agrees(const Bytes& snapshot, std::uint64_t epoch, std::uint64_t k) {
  testing::ScratchDir dir;
  const auto path = dir / "snapshot.safetensors";
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(snapshot.data()),
             static_cast<std::streamsize>(snapshot.size()));
  auto c = commit_snapshot(snapshot, kat::task_id(), epoch, k);
  ASSERT_TRUE(c.ok()) << c.error().message;
  const std::string expected = canonical_json(
      {{"root", hex_encode(c->root)}, {"fingerprint", fingerprint_to_json(c->fingerprint)}});
  const std::string cmd = "python3 '" + std::string(VT_SOURCE_DIR) +
                          "/reference/fingerprint_ref.py' '" + path.string() + "' " +
                          hex_encode(kat::task_id()) + " " + std::to_string(epoch) + " " +
                          std::to_string(k);
  auto run = testing::run_command(cmd, dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  std::string out = run.out;
  while (!out.empty() && out.back() == '\n') out.pop_back();
  EXPECT_EQ(out, expected);
}

TEST(PythonReference, AgreesOnTheKnownAnswerSnapshot) {
  if (!testing::have_program("python3")) GTEST_SKIP() << "python3 not found";
  expect_reference_agrees(kat::snapshot(), 1, 10);
}

TEST(PythonReference, AgreesOnAMultiChunkSnapshot) {
  if (!testing::have_program("python3")) GTEST_SKIP() << "python3 not found";
  const Bytes snapshot = large_snapshot();
  ASSERT_GT(snapshot.size(), 3u << 20);
  expect_reference_agrees(snapshot, 9, 1000);
  expect_reference_agrees(snapshot, 10, 4);  // the minimum: one per floating tensor
}

}  // namespace
}  // namespace vt::fp
