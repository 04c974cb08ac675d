// The verifier's scratch folder and the states it keeps there: read back by positions exactly as
// from memory, refused when not a state, removed when let go of, and the folder with them.
#include "verifier/check/scratch.h"

#include <gtest/gtest.h>

#include <numeric>

#include "fingerprint/merkle.h"
#include "fingerprint/sampling.h"

namespace vt::verifier {
namespace {

Bytes sample_state() {
  std::vector<float> w(5000);
  std::iota(w.begin(), w.end(), -2500.0f);
  std::vector<std::uint16_t> h{0x3c00, 0x4000, 0xc000, 0x8000};  // F16 1, 2, -2, -0
  auto raw = [](const auto& v) {
    return ByteSpan(reinterpret_cast<const std::uint8_t*>(v.data()), v.size() * sizeof(v[0]));
  };
  auto bytes = write_canonical(
      {{{"w", DType::kF32, {50, 100}}, raw(w)}, {{"h", DType::kF16, {4}}, raw(h)}}, {});
  EXPECT_TRUE(bytes.ok());
  return bytes.ok() ? *bytes : Bytes{};
}

TEST(Scratch, AStateFileGathersWhatTheBytesGather) {
  auto folder = ScratchFolder::create();
  ASSERT_TRUE(folder.ok()) << folder.error().message;
  const Bytes bytes = sample_state();
  const auto file = (*folder)->fresh_name("state", ".safetensors");
  ASSERT_TRUE((*folder)->write(file, bytes).ok());
  auto state = StateFile::adopt(*folder, file, fp::merkle_root(bytes));
  ASSERT_TRUE(state.ok()) << state.error().message;
  EXPECT_EQ((*state)->size(), bytes.size());
  auto view = parse_safetensors(bytes);
  ASSERT_TRUE(view.ok());
  for (std::uint64_t seed = 0; seed < 4; ++seed) {
    Digest d{};
    d[0] = static_cast<std::uint8_t>(seed);
    auto plan = fp::plan_samples(d, std::span<const TensorEntry>(view->tensors), 37);
    ASSERT_TRUE(plan.ok()) << plan.error().message;
    auto from_memory = fp::gather(*plan, *view);
    auto from_file = (*state)->gather(*plan);
    ASSERT_TRUE(from_memory.ok() && from_file.ok());
    EXPECT_EQ(*from_file, *from_memory);
  }
  auto whole = (*state)->read_all();
  ASSERT_TRUE(whole.ok());
  EXPECT_EQ(*whole, bytes);
  state->reset();
  EXPECT_FALSE(std::filesystem::exists(file)) << "removed with its last holder";
}

TEST(Scratch, WhatIsNotAStateIsRefusedAndRemoved) {
  auto folder = ScratchFolder::create();
  ASSERT_TRUE(folder.ok());
  const std::vector<std::string> junk = {"", "tiny", "\xff\xff\xff\xff\xff\xff\xff\x7f{}"};
  for (const std::string& text : junk) {
    const auto file = (*folder)->fresh_name("junk", ".safetensors");
    ASSERT_TRUE((*folder)->write(file, as_bytes(text)).ok());
    auto state = StateFile::adopt(*folder, file, Digest{});
    ASSERT_FALSE(state.ok());
    EXPECT_NE(state.error().message.find(file.string()), std::string::npos)
        << state.error().message;
    EXPECT_FALSE(std::filesystem::exists(file));
  }
  auto missing = StateFile::adopt(*folder, (*folder)->path() / "none", Digest{});
  EXPECT_FALSE(missing.ok());
}

TEST(Scratch, TheFolderLivesAsLongAsItsLastState) {
  std::filesystem::path where;
  std::shared_ptr<const StateFile> kept;
  {
    auto folder = ScratchFolder::create();
    ASSERT_TRUE(folder.ok());
    where = (*folder)->path();
    EXPECT_NE(where.filename().string().find("veritrain-replay-"), std::string::npos);
    const Bytes bytes = sample_state();
    const auto file = (*folder)->fresh_name("state", ".safetensors");
    EXPECT_NE(file, (*folder)->fresh_name("state", ".safetensors"));
    ASSERT_TRUE((*folder)->write(file, bytes).ok());
    auto state = StateFile::adopt(*folder, file, fp::merkle_root(bytes));
    ASSERT_TRUE(state.ok());
    kept = *state;
  }
  EXPECT_TRUE(std::filesystem::exists(where));
  EXPECT_TRUE(kept->read_all().ok());
  kept.reset();
  EXPECT_FALSE(std::filesystem::exists(where));
}

}  // namespace
}  // namespace vt::verifier
