// reference/gdn_conv.cpp against hand-computed values on a tiny shape.
#include <gtest/gtest.h>

#include <cmath>

#include "reference/gdn_math.h"

namespace ssm::ref {

namespace {
double silu(double x) { return x / (1.0 + std::exp(-x)); }

LayerSpec tiny_conv_spec(bool bias) {
  LayerSpec s;
  s.nk = 1; s.nv = 1; s.kd = 2; s.vd = 1; s.d_conv = 2; s.conv_bias = bias;
  return s;  // 5 channels: q0 q1 k0 k1 v0
}
}  // namespace

TEST(GdnConv, ShiftsWindowAppliesSiluAndNormalisesQK) {
  const LayerSpec s = tiny_conv_spec(false);
  LayerWeights w;
  w.conv_w = {0.5f, 1.0f, 0.5f, 1.0f, 0.5f, 1.0f, 0.5f, 1.0f, 0.5f, 1.0f};  // [5][2]
  std::vector<float> win(10, 0.0f);
  const float x1[5] = {1, 2, 3, 4, 5};
  VecD y = conv_update(s, w, win.data(), x1);
  // window column 1 (newest) holds x, column 0 the old (zero) value
  for (int c = 0; c < 5; ++c) {
    EXPECT_EQ(win[size_t(c) * 2], 0.0f);
    EXPECT_EQ(win[size_t(c) * 2 + 1], x1[c]);
  }
  const double q0 = silu(1), q1 = silu(2), nq = std::sqrt(q0 * q0 + q1 * q1 + 1e-6);
  const double k0 = silu(3), k1 = silu(4), nk = std::sqrt(k0 * k0 + k1 * k1 + 1e-6);
  EXPECT_NEAR(y[0], q0 / nq, 1e-15);
  EXPECT_NEAR(y[1], q1 / nq, 1e-15);
  EXPECT_NEAR(y[2], k0 / nk, 1e-15);
  EXPECT_NEAR(y[3], k1 / nk, 1e-15);
  EXPECT_NEAR(y[4], silu(5), 1e-15);  // V: silu only

  const float x2[5] = {-1, 0, 1, 2, -3};
  y = conv_update(s, w, win.data(), x2);
  EXPECT_EQ(win[8], 5.0f);  // shifted left: old newest is now oldest
  EXPECT_EQ(win[9], -3.0f);
  EXPECT_NEAR(y[4], silu(0.5 * 5 + 1.0 * -3), 1e-15);
}

TEST(GdnConv, AddsBiasBeforeSilu) {
  const LayerSpec s = tiny_conv_spec(true);
  LayerWeights w;
  w.conv_w.assign(10, 0.0f);
  w.conv_bias = {0, 0, 0, 0, 0.25f};
  std::vector<float> win(10, 0.0f);
  const float x[5] = {1, 1, 1, 1, 1};
  const VecD y = conv_update(s, w, win.data(), x);
  EXPECT_NEAR(y[4], silu(0.25), 1e-15);
  EXPECT_NEAR(y[0], 0.0, 1e-15);  // zero conv output: the 1e-6 keeps the norm finite
}

TEST(GdnConv, FullWindowOfDConvInputsIsKept) {
  LayerSpec s = tiny_conv_spec(false);
  s.d_conv = 4;
  LayerWeights w;
  w.conv_w.assign(20, 1.0f);
  std::vector<float> win(20, 0.0f);
  for (int t = 1; t <= 5; ++t) {
    const float x[5] = {float(t), 0, 0, 0, float(t)};
    conv_update(s, w, win.data(), x);
  }
  EXPECT_EQ(win[16], 2.0f);  // channel 4 keeps inputs 2..5, oldest first
  EXPECT_EQ(win[19], 5.0f);
}

}  // namespace ssm::ref
