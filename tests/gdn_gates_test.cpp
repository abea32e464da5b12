// reference/gdn_gates.cpp: values and every clamp of STATE-MODEL section 3.2.
#include <gtest/gtest.h>

#include <cmath>

#include "reference/gdn_math.h"

namespace ssm::ref {

namespace {
Gates one(float A_log, float dt_bias, float a, float b, GateMath math = GateMath::clamped) {
  LayerSpec s;
  s.nk = 1; s.nv = 1;
  s.numerics.gates = math;
  LayerWeights w;
  w.A_log = {A_log};
  w.dt_bias = {dt_bias};
  return gates(s, w, &a, &b);
}
}  // namespace

TEST(GdnGates, PlainValues) {
  const Gates g = one(0, 0, 0, 0);  // dt = ln 2, A = 1, g = 1/2
  EXPECT_DOUBLE_EQ(g.beta[0], 0.5);
  EXPECT_NEAR(g.g[0], 0.5, 1e-15);
  const Gates h = one(std::log(2.0f), 1.0f, 0.5f, 2.0f);
  const double dt = std::log1p(std::exp(1.5)), A = std::exp(double(std::log(2.0f)));
  EXPECT_NEAR(h.g[0], std::exp(-A * dt), 1e-15);
  EXPECT_NEAR(h.beta[0], 1.0 / (1.0 + std::exp(-2.0)), 1e-15);
}

TEST(GdnGates, DecayClampsToOpenUnitInterval) {
  EXPECT_DOUBLE_EQ(one(-100, 0, 0, 0).g[0], 1.0 - 1e-6);  // A ~ 0: no forgetting, clamped below 1
  EXPECT_DOUBLE_EQ(one(10, 5, 5, 0).g[0], 1e-6);          // g underflows towards 0
}

TEST(GdnGates, DtInputClampsAt20) {
  // a + dt_bias above 20 behaves exactly as 20
  EXPECT_DOUBLE_EQ(one(-12, 0, 100, 0).g[0], one(-12, 0, 20, 0).g[0]);
  EXPECT_NE(one(-12, 0, 19, 0).g[0], one(-12, 0, 20, 0).g[0]);
}

TEST(GdnGates, ALogClampsAt20) {
  // a = -20: dt ~ e^-20, so A = e^20 gives g ~ e^-1, well inside the clamp
  const double g20 = one(20, 0, -20, 0).g[0];
  EXPECT_NEAR(g20, std::exp(-std::exp(20.0) * std::log1p(std::exp(-20.0))), 1e-12);
  EXPECT_DOUBLE_EQ(one(25, 0, -20, 0).g[0], g20);
  EXPECT_GT(g20, 0.3);
}

// GateMath::torch (Hugging Face transformers, vLLM, fla): softplus is x itself above 20, A_log and
// g are not clamped; below every threshold it is the contract's math bit for bit.
TEST(GdnGates, TorchGatesSaturateAsTorchSoftplusAndDoNotClamp) {
  const GateMath T = GateMath::torch;
  EXPECT_EQ(one(0.5f, 1.0f, 0.5f, 2.0f, T).g[0], one(0.5f, 1.0f, 0.5f, 2.0f).g[0]);
  EXPECT_EQ(one(0.5f, 1.0f, 0.5f, 2.0f, T).beta[0], one(0.5f, 1.0f, 0.5f, 2.0f).beta[0]);
  // a + dt_bias = 100 > 20: dt = 100 (not softplus(20))
  EXPECT_NEAR(one(-12, 0, 100, 0, T).g[0], std::exp(-std::exp(-12.0) * 100.0), 1e-15);
  EXPECT_NE(one(-12, 0, 100, 0, T).g[0], one(-12, 0, 20, 0, T).g[0]);
  // A_log = 25 is not clamped to 20
  EXPECT_NEAR(one(25, 0, -20, 0, T).g[0], std::exp(-std::exp(25.0) * std::log1p(std::exp(-20.0))), 1e-12);
  EXPECT_LT(one(25, 0, -20, 0, T).g[0], one(20, 0, -20, 0, T).g[0]);
  // g is not clamped into [1e-6, 1 - 1e-6]
  EXPECT_LT(one(10, 5, 5, 0, T).g[0], 1e-6);
  EXPECT_GT(one(-100, 0, 0, 0, T).g[0], 1.0 - 1e-6);
}

}  // namespace ssm::ref
