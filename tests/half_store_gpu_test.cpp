// The CUDA kernels' FP16 state stores (cuda/common.cuh: store_half_clamped, one value;
// store_half2_clamped, a pair clamped after the rounding, which the row kernel's FP16 registers
// use) give core/half.h's store_half_clamped bits (STATE-MODEL section 6: clamp to +-65504, NaN to
// -65504, round to nearest even) on every float around the clamp and the FP16 rounding and
// subnormal boundaries, the specials, and random bit patterns (seed printed). The campaigns cannot
// show this alone: the FP16 classes allow ULPs, and a saturated value differs by far more only if a
// case reaches it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/half.h"
#include "cuda_test_support.h"
#include "tests/half_store_kernels.h"

namespace ssm::test {
namespace {

class HalfStoreGpu : public GpuTest {};

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}
uint32_t bits_of(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

TEST_F(HalfStoreGpu, BothStoresGiveTheContractsBits) {
  std::vector<float> v;
  // every float within 2^12 representable steps of each boundary, both signs: the clamp (65504),
  // the first value rounding to inf (65520), the largest finite float, the smallest normal and
  // subnormal FP16 (2^-14, 2^-24) and half of the latter (2^-25: rounds to 0 or 2^-24), 1, 0
  for (float edge : {65504.0f, 65520.0f, std::numeric_limits<float>::max(), 6.103515625e-05f, 5.9604644775390625e-08f,
                     2.98023223876953125e-08f, 1.0f, 0.0f})
    for (float sign : {1.0f, -1.0f})
      for (int64_t d = -4096; d <= 4096; ++d) {
        const int64_t b = int64_t(bits_of(edge)) + d;
        if (b >= 0 && b <= 0x7f800000) v.push_back(sign * from_bits(uint32_t(b)));
      }
  for (uint32_t b : {0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00000u, 0x7f800001u, 0x7fbfffffu, 0xffffffffu})
    v.push_back(from_bits(b));  // infinities, quiet and signalling NaNs of several payloads
  const uint32_t seed = std::random_device{}();
  std::printf("HalfStoreGpu seed %u (set SSMCHECK_HALF_STORE_SEED to rerun)\n", seed);
  const char* env = std::getenv("SSMCHECK_HALF_STORE_SEED");
  std::mt19937 rng(env ? uint32_t(std::strtoul(env, nullptr, 10)) : seed);
  for (int i = 0; i < (1 << 22); ++i) v.push_back(from_bits(uint32_t(rng())));
  if (v.size() % 2) v.push_back(0.0f);

  const DeviceHalfStores got = device_half_stores(v);
  ASSERT_EQ(got.one.size(), v.size());
  int64_t wrong_one = 0, wrong_pairs = 0, saturated = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t want = store_half_clamped(v[i]);
    saturated += (want & 0x7fffu) == 0x7bffu;
    if (got.one[i] != want && wrong_one++ < 5)
      ADD_FAILURE() << "store_half_clamped(" << v[i] << ", bits 0x" << std::hex << bits_of(v[i]) << ") = 0x"
                    << got.one[i] << ", contract 0x" << want;
    if (got.pairs[i] != want && wrong_pairs++ < 5)
      ADD_FAILURE() << "store_half2_clamped(" << v[i] << ", bits 0x" << std::hex << bits_of(v[i]) << ") = 0x"
                    << got.pairs[i] << ", contract 0x" << want;
  }
  EXPECT_EQ(wrong_one, 0);
  EXPECT_EQ(wrong_pairs, 0);
  EXPECT_GT(saturated, 4096 * 4) << "the values reach the clamp";
}

}  // namespace
}  // namespace ssm::test
