#pragma once
// Small canonical snapshots for the compression tests: every dtype, a tensor that spans several
// sections, an empty tensor, and Gaussian float data shaped like real weights.

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "common/safetensors.h"

namespace vt::comp::testing {

struct OwnedTensor {
  TensorSpec spec;
  Bytes data;
};

inline Bytes to_canonical(const std::vector<OwnedTensor>& tensors) {
  std::vector<TensorData> views;
  for (const OwnedTensor& t : tensors) views.push_back({t.spec, t.data});
  auto out = write_canonical(views, {{"epoch", "3"}});
  EXPECT_TRUE(out.ok()) << (out.ok() ? "" : out.error().message);
  return out.ok() ? std::move(out).value() : Bytes{};
}

inline Bytes gaussian_f32(std::size_t n, double sigma, std::mt19937_64& rng) {
  std::normal_distribution<float> dist(0.0f, static_cast<float>(sigma));
  Bytes out(n * 4);
  for (std::size_t i = 0; i < n; ++i) {
    float v = dist(rng);
    std::memcpy(out.data() + 4 * i, &v, 4);
  }
  return out;
}

inline Bytes random_bytes(std::size_t n, std::mt19937_64& rng) {
  Bytes out(n);
  for (auto& b : out) b = static_cast<std::uint8_t>(rng());
  return out;
}

// One tensor of every dtype; "big.weight" is 24 KiB of f32 so that a 4 KiB chunk size splits it.
inline std::vector<OwnedTensor> mixed_tensors(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<OwnedTensor> t;
  t.push_back({{"big.weight", DType::kF32, {64, 96}}, gaussian_f32(64 * 96, 0.02, rng)});
  t.push_back({{"bf16.weight", DType::kBF16, {300}}, random_bytes(600, rng)});
  t.push_back({{"f16.weight", DType::kF16, {301}}, random_bytes(602, rng)});
  t.push_back({{"f64.buffer", DType::kF64, {17}}, random_bytes(136, rng)});
  t.push_back({{"step", DType::kI64, {1}}, Bytes{7, 0, 0, 0, 0, 0, 0, 0}});
  t.push_back({{"i32.idx", DType::kI32, {9}}, random_bytes(36, rng)});
  t.push_back({{"i16.idx", DType::kI16, {5}}, random_bytes(10, rng)});
  t.push_back({{"rng.cpu", DType::kU8, {333}}, random_bytes(333, rng)});
  t.push_back({{"mask", DType::kBool, {3}}, Bytes{0, 1, 1}});
  t.push_back({{"empty", DType::kF32, {0, 4}}, Bytes{}});
  return t;
}

// Adds `rel` × N(0, 1) × |x| to a fraction of the f32 entries of every f32 tensor.
inline void perturb_f32(std::vector<OwnedTensor>& tensors, double rel, double fraction,
                        std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::uniform_real_distribution<double> u(0, 1);
  for (OwnedTensor& t : tensors) {
    if (t.spec.dtype != DType::kF32) continue;
    for (std::size_t i = 0; i + 4 <= t.data.size(); i += 4) {
      if (u(rng) >= fraction) continue;
      float v;
      std::memcpy(&v, t.data.data() + i, 4);
      v += static_cast<float>(rel) * std::fabs(v) * dist(rng);
      std::memcpy(t.data.data() + i, &v, 4);
    }
  }
}

}  // namespace vt::comp::testing
