#include "common/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>

namespace vt {
namespace {

Bytes f32_bytes(std::initializer_list<float> values) {
  Bytes out(values.size() * 4);
  std::memcpy(out.data(), values.begin(), out.size());
  return out;
}

Bytes tiny_file() {
  Bytes w = f32_bytes({1.0f, -2.0f});
  Bytes b = f32_bytes({0.5f});
  Bytes step{3, 0, 0, 0, 0, 0, 0, 0};
  auto r = write_canonical({{{"w", DType::kF32, {2}}, w},
                            {{"b", DType::kF32, {1}}, b},
                            {{"step", DType::kI64, {}}, step}},
                           {{"epoch", "1"}});
  EXPECT_TRUE(r.ok());
  return *r;
}

TEST(Safetensors, CanonicalBytesAreExact) {
  Bytes file = tiny_file();
  std::string header =
      R"({"__metadata__":{"epoch":"1"},"b":{"data_offsets":[0,4],"dtype":"F32","shape":[1]},)"
      R"("step":{"data_offsets":[4,12],"dtype":"I64","shape":[]},)"
      R"("w":{"data_offsets":[12,20],"dtype":"F32","shape":[2]}})";
  std::size_t padded = (header.size() + 7) / 8 * 8;
  ASSERT_EQ(file.size(), 8 + padded + 20);
  EXPECT_EQ(get_u64le(file.data()), padded);
  EXPECT_EQ(std::string(file.begin() + 8, file.begin() + 8 + header.size()), header);
  for (std::size_t i = 8 + header.size(); i < 8 + padded; ++i) EXPECT_EQ(file[i], ' ');
}

TEST(Safetensors, ParsesWhatItWrites) {
  Bytes file = tiny_file();
  auto view = parse_safetensors(file);
  ASSERT_TRUE(view.ok()) << view.error().message;
  ASSERT_EQ(view->tensors.size(), 3u);
  EXPECT_EQ(view->tensors[0].name, "b");
  EXPECT_EQ(view->metadata.at("epoch"), "1");
  const TensorEntry* w = view->find("w");
  ASSERT_NE(w, nullptr);
  EXPECT_EQ(w->numel(), 2u);
  float v[2];
  std::memcpy(v, view->data(*w).data(), 8);
  EXPECT_EQ(v[1], -2.0f);
}

TEST(Safetensors, RejectsTruncation) {
  Bytes file = tiny_file();
  file.resize(file.size() - 1);
  auto view = parse_safetensors(file);
  ASSERT_FALSE(view.ok());
  EXPECT_NE(view.error().message.find("\"w\""), std::string::npos) << view.error().message;
  EXPECT_FALSE(parse_safetensors(ByteSpan(file.data(), 5)).ok());
}

TEST(Safetensors, RejectsHugeHeaderLength) {
  Bytes file = tiny_file();
  put_u64le(file.data(), ~0ull);
  auto view = parse_safetensors(file);
  ASSERT_FALSE(view.ok());
  EXPECT_NE(view.error().message.find("header length"), std::string::npos);
}

TEST(Safetensors, NonCanonicalWhitespaceIsRejectedButLoadable) {
  std::string header = R"({"a": {"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
  Bytes file(8);
  put_u64le(file.data(), header.size());
  file.insert(file.end(), header.begin(), header.end());
  file.push_back(7);
  auto strict = parse_safetensors(file);
  ASSERT_FALSE(strict.ok());
  EXPECT_NE(strict.error().message.find("not canonical"), std::string::npos);
  EXPECT_TRUE(parse_safetensors(file, Canonical::kAllowAny).ok());
}

TEST(Safetensors, RejectsShapeSizeMismatchAndBadDtype) {
  for (std::string header : {R"({"a":{"data_offsets":[0,1],"dtype":"F32","shape":[1]}})",
                             R"({"a":{"data_offsets":[0,1],"dtype":"Q4","shape":[1]}})",
                             R"({"a":{"data_offsets":[0,1],"dtype":"U8","shape":[-1]}})"}) {
    Bytes file(8);
    put_u64le(file.data(), header.size());
    file.insert(file.end(), header.begin(), header.end());
    file.push_back(0);
    EXPECT_FALSE(parse_safetensors(file, Canonical::kAllowAny).ok()) << header;
  }
}

TEST(Safetensors, WriterRejectsDuplicatesAndWrongSizes) {
  Bytes one = f32_bytes({1.0f});
  EXPECT_FALSE(
      write_canonical({{{"x", DType::kF32, {1}}, one}, {{"x", DType::kF32, {1}}, one}}, {}).ok());
  EXPECT_FALSE(write_canonical({{{"x", DType::kF32, {2}}, one}}, {}).ok());
}

}  // namespace
}  // namespace vt
