#include "fingerprint/fingerprint.h"

#include <gtest/gtest.h>

#include <cstring>

#include <nlohmann/json.hpp>

#include "common/json.h"
#include "fingerprint/merkle.h"
#include "tests/fingerprint/plan_check.h"

namespace vt::fp {
namespace {

// A snapshot whose F32 tensor "w" holds its own flat index as value, so gathered values say
// where they came from.
struct Snapshot {
  Bytes bytes;
  SafetensorsView view;
};

Snapshot make_snapshot() {
  std::vector<float> w(1000);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i);
  std::vector<std::uint16_t> b{0x3c00, 0x4000, 0xc000};  // F16 1, 2, -2
  std::vector<std::int64_t> step{42};
  auto raw = [](const auto& v) {
    return ByteSpan(reinterpret_cast<const std::uint8_t*>(v.data()), v.size() * sizeof(v[0]));
  };
  Snapshot s;
  s.bytes = write_canonical({{{"w", DType::kF32, {10, 100}}, raw(w)},
                             {{"b", DType::kF16, {3}}, raw(b)},
                             {{"step", DType::kI64, {}}, raw(step)}},
                            {})
                .value();
  s.view = parse_safetensors(s.bytes).value();
  return s;
}

Digest digest_of_zero() { return Digest{}; }

Digest task_id() {
  Digest d;
  for (std::size_t i = 0; i < d.size(); ++i) d[i] = static_cast<std::uint8_t>(i);
  return d;
}

TEST(Fingerprint, GathersTheValuesAtThePlannedPositions) {
  Snapshot s = make_snapshot();
  Digest seed = tracking_seed(task_id());
  auto fp = fingerprint_snapshot(s.view, seed, 20);
  ASSERT_TRUE(fp.ok()) << fp.error().message;
  ASSERT_EQ(fp->plan.tensors.size(), 2u);
  const TensorSamples& w = fp->plan.tensors[1];
  ASSERT_EQ(w.name, "w");
  for (std::size_t i = 0; i < w.indices.size(); ++i) {
    float v;
    std::memcpy(&v, fp->values[1].data() + 4 * i, 4);
    EXPECT_EQ(v, static_cast<float>(w.indices[i]));
  }
  EXPECT_EQ(fp->values[0].size(), 2 * fp->plan.tensors[0].indices.size());
}

TEST(Fingerprint, FromValuesChecksSizesAndDtypes) {
  Snapshot s = make_snapshot();
  auto fp = fingerprint_snapshot(s.view, digest_of_zero(), 10);
  ASSERT_TRUE(fp.ok());
  auto same = fingerprint_from_values(fp->plan, fp->values);
  ASSERT_TRUE(same.ok());
  EXPECT_EQ(*same, *fp);
  auto values = fp->values;
  values[1].pop_back();
  auto short_values = fingerprint_from_values(fp->plan, values);
  ASSERT_FALSE(short_values.ok());
  EXPECT_NE(short_values.error().message.find("tensor \"w\" has"), std::string::npos)
      << short_values.error().message;
  EXPECT_FALSE(fingerprint_from_values(fp->plan, {fp->values[0]}).ok());
  SamplePlan ints = fp->plan;
  ints.tensors[0].dtype = DType::kI16;
  auto bad = fingerprint_from_values(ints, fp->values);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.error().message.find("has dtype I16; only F64, F32, F16 and BF16"),
            std::string::npos);
}

TEST(Fingerprint, GatherNamesAMissingOrReshapedTensor) {
  Snapshot s = make_snapshot();
  auto fp = fingerprint_snapshot(s.view, digest_of_zero(), 10);
  ASSERT_TRUE(fp.ok());
  SamplePlan plan = fp->plan;
  plan.tensors[1].name = "v";
  auto missing = gather(plan, s.view);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.error().message.find("no tensor \"v\""), std::string::npos);
  plan = fp->plan;
  plan.tensors[1].numel = 999;
  EXPECT_FALSE(gather(plan, s.view).ok());
}

TEST(Fingerprint, CommitBindsRootAndPositions) {
  Snapshot s = make_snapshot();
  auto c = commit_snapshot(s.bytes, task_id(), 3, 16);
  ASSERT_TRUE(c.ok()) << c.error().message;
  EXPECT_EQ(c->root, merkle_root(s.bytes));
  EXPECT_EQ(c->fingerprint.plan.seed, commitment_seed(task_id(), 3, c->root));
  EXPECT_TRUE(check_plan(c->fingerprint.plan).ok());
  // One changed weight changes the root and with it the positions.
  Bytes changed = s.bytes;
  changed.back() ^= 0x01;
  auto c2 = commit_snapshot(changed, task_id(), 3, 16);
  ASSERT_TRUE(c2.ok());
  EXPECT_NE(c2->root, c->root);
  EXPECT_NE(c2->fingerprint.plan.tensors[1].indices, c->fingerprint.plan.tensors[1].indices);
}

TEST(FingerprintJson, RoundTripsThroughCanonicalText) {
  Snapshot s = make_snapshot();
  auto fp = fingerprint_snapshot(s.view, digest_of_zero(), 12);
  ASSERT_TRUE(fp.ok());
  std::string text = canonical_json(fingerprint_to_json(*fp));
  EXPECT_EQ(text.rfind("{\"seed\":\"", 0), 0u) << text;
  auto parsed = fingerprint_from_json(parse_json(text, "t").value());
  ASSERT_TRUE(parsed.ok()) << parsed.error().message;
  EXPECT_EQ(*parsed, *fp);
  EXPECT_EQ(canonical_json(fingerprint_to_json(*parsed)), text);
  auto direct = fingerprint_from_json(fingerprint_to_json(*fp));  // signed integers, not parsed
  ASSERT_TRUE(direct.ok()) << direct.error().message;
}

std::string json_error(const std::function<void(nlohmann::json&)>& edit) {
  Snapshot s = make_snapshot();
  nlohmann::json j =
      fingerprint_to_json(fingerprint_snapshot(s.view, digest_of_zero(), 12).value());
  edit(j);
  auto r = fingerprint_from_json(nlohmann::json::parse(j.dump()));
  return r.ok() ? "" : r.error().message;
}

TEST(FingerprintJson, RejectsBadFieldsNamingThem) {
  EXPECT_EQ(json_error([](auto& j) { j["tensors"][0]["dtype"] = "I32"; }),
            "fingerprint: tensors[0].dtype: \"I32\" is not one of F64, F32, F16, BF16");
  EXPECT_EQ(json_error([](auto& j) { j["tensors"][1]["dtype"] = "F8_E4M3"; }),
            "fingerprint: tensors[1].dtype: \"F8_E4M3\" is not one of F64, F32, F16, BF16");
  EXPECT_NE(json_error([](auto& j) {
              j["tensors"][1]["values"] = "00";
            }).find("fingerprint: tensors[1].values: "),
            std::string::npos);
  EXPECT_NE(json_error([](auto& j) {
              j["tensors"][1]["indices"][0] = 1000;
            }).find("is not below numel 1000"),
            std::string::npos);
  EXPECT_NE(json_error([](auto& j) { j["tensors"][1]["indices"][1] = 0; }).find("ascend strictly"),
            std::string::npos);
  EXPECT_NE(
      json_error([](auto& j) { std::swap(j["tensors"][0], j["tensors"][1]); }).find("out of order"),
      std::string::npos);
  EXPECT_EQ(json_error([](auto& j) { j["version"] = 2; }),
            "fingerprint: version: 2 is not supported (expected 1)");
  EXPECT_EQ(json_error([](auto& j) { j.erase("seed"); }),
            "fingerprint: seed: missing; expected a string (this field is required)");
}

}  // namespace
}  // namespace vt::fp
