// reference/pair_entropy.py states how small a before/after pair can get with a per-byte-plane
// coder (docs/benchmarks.md leans on it to explain the real-epoch pair ratio). This checks both
// sides of that claim on an Adam-shaped pair: the codec lands just under the bound, not above it
// (the script would be wrong) and not far below (the delta codec would have regressed).

#include <gtest/gtest.h>

#include <fstream>
#include <random>

#include "compression/container.h"
#include "tests/compression/test_states.h"
#include "tests/test_util.h"

namespace vt::comp {
namespace {

using testing::OwnedTensor;

Bytes f32_bytes(const std::vector<float>& values) {
  Bytes out(values.size() * 4);
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

// Weights, exp_avg and exp_avg_sq before and after an epoch's worth of change: the weights move
// by 2 % of their size, the first moment is mostly new, the second decays and gains new terms.
std::pair<Bytes, Bytes> adam_pair(std::size_t n) {
  std::mt19937_64 rng(11);
  std::normal_distribution<float> unit(0.0f, 1.0f);
  std::vector<float> w(n), m(n), v(n), w2(n), m2(n), v2(n);
  for (std::size_t i = 0; i < n; ++i) {
    const float g = 1e-3f * std::exp(0.5f * unit(rng));
    w[i] = 0.02f * unit(rng);
    m[i] = 0.25f * g * unit(rng);
    v[i] = g * g * std::exp(0.1f * unit(rng));
    w2[i] = w[i] + 0.02f * 0.02f * unit(rng);
    m2[i] = 0.1f * m[i] + 0.25f * g * unit(rng);
    v2[i] = 0.98f * v[i] + 0.02f * g * g * std::exp(0.1f * unit(rng));
  }
  auto state = [n](const std::vector<float>& a, const std::vector<float>& b,
                   const std::vector<float>& c) {
    const std::int64_t rows = static_cast<std::int64_t>(n / 64);
    return testing::to_canonical(
        {{{"layer.weight", DType::kF32, {rows, 64}}, f32_bytes(a)},
         {{"optim.layer.weight.exp_avg", DType::kF32, {rows, 64}}, f32_bytes(b)},
         {{"optim.layer.weight.exp_avg_sq", DType::kF32, {rows, 64}}, f32_bytes(c)}});
  };
  return {state(w, m, v), state(w2, m2, v2)};
}

void write_file(const std::filesystem::path& path, const Bytes& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

TEST(PairEntropyBound, TheDeltaCodecLandsJustUnderTheOrderZeroBound) {
  if (!vt::testing::have_program("python3")) GTEST_SKIP() << "python3 not found";
  const auto [before, after] = adam_pair(64 * 1024);
  EncodeOptions single;
  auto before_container = encode(before, single);
  ASSERT_TRUE(before_container.ok()) << before_container.error().message;
  EncodeOptions delta;
  delta.codec = Codec::kDelta;
  delta.base = before;
  auto after_container = encode(after, delta);
  ASSERT_TRUE(after_container.ok()) << after_container.error().message;
  const double measured = static_cast<double>(before.size() + after.size()) /
                          static_cast<double>(before_container->size() + after_container->size());

  vt::testing::ScratchDir dir;
  write_file(dir / "before.safetensors", before);
  write_file(dir / "after.safetensors", after);
  auto run = vt::testing::run_command("python3 '" + std::string(VT_SOURCE_DIR) +
                                          "/reference/pair_entropy.py' '" +
                                          (dir / "before.safetensors").string() + "' '" +
                                          (dir / "after.safetensors").string() + "'",
                                      dir.path());
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto at = run.out.find("best pair ratio ");
  ASSERT_NE(at, std::string::npos) << run.out;
  const double bound = std::stod(run.out.substr(at + 16));
  EXPECT_LT(measured, bound * 1.01) << run.out;
  EXPECT_GT(measured, bound * 0.96) << run.out;
}

}  // namespace
}  // namespace vt::comp
