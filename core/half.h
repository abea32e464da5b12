// IEEE binary16 <-> binary32 bit conversions, shared by every folder (no Eigen, no CUDA).
// float_to_half_rne: round to nearest even, no saturation (overflow -> inf), NaN stays NaN.
// The kernel-store variant (clamp to +-65504, NaN -> -65504) is store_half_clamped.
// Host and device code (nvcc) share these exact functions, so the CUDA converters cannot drift.
#pragma once
#include <cstdint>
#include <cstring>

#ifdef __CUDACC__
#define SSM_HOST_DEVICE __host__ __device__
#else
#define SSM_HOST_DEVICE
#endif

namespace ssm {

SSM_HOST_DEVICE inline float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: renormalise
      int e = -1;
      do { ++e; mant <<= 1; } while ((mant & 0x400u) == 0);
      bits = sign | uint32_t(127 - 15 - e) << 23 | (mant & 0x3ffu) << 13;
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | mant << 13;
  } else {
    bits = sign | (exp + 127 - 15) << 23 | mant << 13;
  }
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

SSM_HOST_DEVICE inline uint16_t float_to_half_rne(float f) {
  uint32_t x;
  memcpy(&x, &f, 4);
  const uint16_t sign = uint16_t((x >> 16) & 0x8000u);
  const uint32_t ax = x & 0x7fffffffu;
  if (ax >= 0x7f800000u) return sign | (ax > 0x7f800000u ? 0x7e00u : 0x7c00u);  // NaN / inf
  if (ax >= 0x477ff000u) return sign | 0x7c00u;  // >= 65520 rounds to inf
  if (ax < 0x38800000u) {                        // below the smallest normal half
    if (ax < 0x33000000u) return sign;           // < 2^-25 rounds to 0 (2^-25 ties to even 0)
    const uint32_t e = ax >> 23;
    const uint32_t m = (ax & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - e;  // 14 + (113 - e) - ... : bits to drop to reach 2^-24 units
    const uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    uint32_t r = q + ((rem > halfway || (rem == halfway && (q & 1))) ? 1 : 0);
    return sign | uint16_t(r);
  }
  uint32_t r = ax - 0x38000000u;  // rebias exponent 127 -> 15
  const uint32_t rem = r & 0x1fffu;
  r >>= 13;
  if (rem > 0x1000u || (rem == 0x1000u && (r & 1))) ++r;
  return sign | uint16_t(r);
}

// What a kernel does when it stores FP16 state: clamp to the finite range, NaN -> -65504.
SSM_HOST_DEVICE inline uint16_t store_half_clamped(float f) {
  if (f != f) return 0xfbffu;  // -65504
  if (f > 65504.0f) f = 65504.0f;
  if (f < -65504.0f) f = -65504.0f;
  return float_to_half_rne(f);
}

SSM_HOST_DEVICE inline bool half_is_finite(uint16_t h) { return (h & 0x7c00u) != 0x7c00u; }

}  // namespace ssm
