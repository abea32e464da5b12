// core/half.h: the converter (RNE, no saturation) and the kernel store (clamped).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "core/half.h"

namespace ssm {

TEST(Half, RoundsToNearestEvenWithoutSaturation) {
  EXPECT_EQ(float_to_half_rne(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half_rne(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half_rne(65519.0f), 0x7bff);  // below the midpoint to inf
  EXPECT_EQ(float_to_half_rne(65520.0f), 0x7c00);  // the midpoint ties to inf (even)
  EXPECT_EQ(float_to_half_rne(-1e6f), 0xfc00);
  // 1 + 2^-11 is exactly between 1 and 1 + 2^-10: ties to even (1.0)
  EXPECT_EQ(float_to_half_rne(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  EXPECT_EQ(float_to_half_rne(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  // subnormals: 2^-24 is the smallest, 2^-25 ties to 0, 3*2^-25 rounds to 2*2^-24
  EXPECT_EQ(float_to_half_rne(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_half_rne(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(float_to_half_rne(3 * std::ldexp(1.0f, -25)), 0x0002);
  EXPECT_EQ(float_to_half_rne(-0.0f), 0x8000);
  const uint16_t nan = float_to_half_rne(std::numeric_limits<float>::quiet_NaN());
  EXPECT_FALSE(half_is_finite(nan));
  EXPECT_NE(nan & 0x3ff, 0);
}

TEST(Half, WideningIsExactForEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = half_to_float(uint16_t(h));
    if (f != f) continue;
    ASSERT_EQ(float_to_half_rne(f), h) << std::hex << h;
  }
}

TEST(Half, KernelStoreClampsAndMapsNaN) {
  EXPECT_EQ(store_half_clamped(1e9f), 0x7bff);
  EXPECT_EQ(store_half_clamped(-1e9f), 0xfbff);
  EXPECT_EQ(store_half_clamped(65520.0f), 0x7bff);
  EXPECT_EQ(store_half_clamped(std::numeric_limits<float>::infinity()), 0x7bff);
  EXPECT_EQ(store_half_clamped(std::numeric_limits<float>::quiet_NaN()), 0xfbff);  // -65504
  EXPECT_EQ(store_half_clamped(0.5f), float_to_half_rne(0.5f));
}

}  // namespace ssm
