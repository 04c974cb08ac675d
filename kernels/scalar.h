#pragma once
// veritrain's own transcendental functions and random numbers, one element at a time
// (docs/portable.md, "Functions" and "Random numbers"). Built from +, −, ×, ÷, comparisons and
// bit moves, which IEEE-754 rounds alike on every machine; they need not be correctly rounded,
// only the same everywhere (and in reference/portable_ref.py). Header-only and free of the
// standard math library, so that a CUDA twin can compile the same text (VT_HD).
//
// Files that include this must be compiled with -ffp-contract=off: `a * b + c` must stay two
// roundings.

#include <cstdint>
#include <cstring>

#include "kernels/stream.h"  // also defines VT_HD

namespace vt::kernels {

VT_HD inline float bits_to_float(std::uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}
VT_HD inline std::uint32_t float_to_bits(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// 2^e as a float, for e in [-126, 127].
VT_HD inline float pow2(int e) { return bits_to_float(static_cast<std::uint32_t>(e + 127) << 23); }

// e^x. Range reduction x = k·ln2 + r with ln2 in two parts (Cody and Waite), a degree-5
// polynomial for e^r − 1 − r (Cephes' coefficients), then a scaling by 2^k that rounds once.
// Written without branches: every case is computed and the last lines select one, so a loop over
// elements vectorises (each lane runs this same sequence: the same bits as one at a time).
VT_HD inline float vt_exp(float x) {
  const bool above = x > 88.72283935546875f;
  const bool below = x < -103.972084045410f;
  // & and |, not && and ||: no short circuit, so no branch. False for NaN.
  const bool in_range = (x <= 88.72283935546875f) & (x >= -103.972084045410f);
  const float xs = in_range ? x : 0.0f;
  const float z = xs * 1.44269502162933349609375f;  // log2(e) in binary32
  const float kf = __builtin_floorf(z + 0.5f);
  const float r = (xs - kf * 0.693359375f) - kf * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  const float y = ((p * r) * r + r) + 1.0f;
  const int k = static_cast<int>(kf);  // in [-150, 128]
  const float high = (y * pow2(127)) * 2.0f;
  const float low = (y * pow2(k < -126 ? k + 64 : 0)) * pow2(-64);
  const float mid = y * pow2(((k > 127) | (k < -126)) ? 0 : k);
  float out = k > 127 ? high : (k < -126 ? low : mid);
  out = above ? bits_to_float(0x7f800000u) : out;  // +inf
  out = below ? 0.0f : out;
  return x != x ? x : out;
}

// ln(x). x = m·2^e with m in [√½, √2), then Cephes' degree-9 polynomial for ln(1 + f).
VT_HD inline float vt_log(float x) {
  if (x != x || x < 0.0f) return bits_to_float(0x7fc00000u);  // NaN
  if (x == 0.0f) return bits_to_float(0xff800000u);           // -inf
  if (x == bits_to_float(0x7f800000u)) return x;              // +inf
  int e = 0;
  if (x < 1.17549435e-38f) {  // subnormal: scale into the normal range first (exact)
    x = x * 8388608.0f;
    e = -23;
  }
  const std::uint32_t u = float_to_bits(x);
  e += static_cast<int>(u >> 23) - 127;
  float m = bits_to_float((u & 0x007fffffu) | 0x3f800000u);
  if (m > 1.41421356f) {
    m = m * 0.5f;
    e = e + 1;
  }
  const float f = m - 1.0f;
  const float zz = f * f;
  float y = 7.0376836292e-2f;
  y = y * f + -1.1514610310e-1f;
  y = y * f + 1.1676998740e-1f;
  y = y * f + -1.2420140846e-1f;
  y = y * f + 1.4249322787e-1f;
  y = y * f + -1.6668057665e-1f;
  y = y * f + 2.0000714765e-1f;
  y = y * f + -2.4999993993e-1f;
  y = y * f + 3.3333331174e-1f;
  y = (y * f) * zz;
  const float ef = static_cast<float>(e);
  y = y + ef * -2.12194440e-4f;
  y = y + -0.5f * zz;
  float r = f + y;
  r = r + ef * 0.693359375f;
  return r;
}

// erf(x): Abramowitz and Stegun 7.1.26 (absolute error below 1.5e-7), odd by construction.
// Branch-free like vt_exp.
VT_HD inline float vt_erf(float x) {
  const float a = x < 0.0f ? -x : x;
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  float p = 1.061405429f;
  p = p * t + -1.453152027f;
  p = p * t + 1.421413741f;
  p = p * t + -0.284496736f;
  p = p * t + 0.254829592f;
  const float y = 1.0f - (p * t) * vt_exp(-(a * a));
  const float odd = x < 0.0f ? -y : y;
  return x != x ? x : odd;
}

// GELU in its erf form, 0.5·x·(1 + erf(x/√2)), and its derivative
// 0.5·(1 + erf(x/√2)) + x·e^(−x²/2)/√(2π). The order of operations is docs/portable.md's.
VT_HD inline float vt_gelu(float x) {
  const float e = vt_erf(x * 0.707106781186547524f);
  return (0.5f * x) * (1.0f + e);
}
VT_HD inline float vt_gelu_grad(float x) {
  const float e = vt_erf(x * 0.707106781186547524f);
  const float density = vt_exp(-0.5f * (x * x)) * 0.398942280401432678f;
  return 0.5f * (1.0f + e) + x * density;
}

// --- the functions of real models (docs/portable.md, "More functions") ------------------------

VT_HD inline bool sign_bit(float x) { return (float_to_bits(x) >> 31) != 0; }

// 1 / (1 + e^−x).
VT_HD inline float vt_sigmoid(float x) { return 1.0f / (1.0f + vt_exp(-x)); }

// tanh(x): Cephes' odd polynomial below 0.625, 1 − 2/(e^2a + 1) above; the sign of x's bit.
VT_HD inline float vt_tanh(float x) {
  if (x != x) return x;
  const float a = sign_bit(x) ? -x : x;
  float y;
  if (a < 0.625f) {
    const float z = a * a;
    float p = -5.70498872745e-3f;
    p = p * z + 2.06390887954e-2f;
    p = p * z + -5.37397155531e-2f;
    p = p * z + 1.33314422036e-1f;
    p = p * z + -3.33332819422e-1f;
    y = (p * z) * a + a;
  } else {
    y = 1.0f - 2.0f / (vt_exp(a + a) + 1.0f);
  }
  return sign_bit(x) ? -y : y;
}

// GELU's tanh form and its derivative, in docs/portable.md's order.
VT_HD inline float vt_gelu_tanh(float x) {
  const float t = vt_tanh(0.797884583f * (x + 0.044715f * (x * (x * x))));
  return (0.5f * x) * (1.0f + t);
}
VT_HD inline float vt_gelu_tanh_grad(float x) {
  const float t = vt_tanh(0.797884583f * (x + 0.044715f * (x * (x * x))));
  return 0.5f * (1.0f + t) +
         ((0.5f * x) * (1.0f - t * t)) * (0.797884583f * (1.0f + 0.134145f * (x * x)));
}

// Random numbers (SplitMix64 read at a counter): kernels/stream.h.

}  // namespace vt::kernels
