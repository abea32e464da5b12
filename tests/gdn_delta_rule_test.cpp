// reference/gdn_delta_rule.cpp and gdn_output_norm.cpp against hand-computed values.
#include <gtest/gtest.h>

#include <cmath>

#include "reference/gdn_math.h"

namespace ssm::ref {

TEST(GdnDeltaRule, HandComputed2x2) {
  MatD H(2, 2);
  H << 1, 2, 3, 4;
  VecD k(2), v(2);
  k << 1, 0;
  v << 1, 1;
  delta_rule(H, k, v, 0.5, 0.5);
  // hk = H^T k = [1, 2]; vn = (v - 0.5 hk) * 0.5 = [0.25, 0]; H = 0.5 H + k vn^T
  EXPECT_DOUBLE_EQ(H(0, 0), 0.75);
  EXPECT_DOUBLE_EQ(H(0, 1), 1.0);
  EXPECT_DOUBLE_EQ(H(1, 0), 1.5);
  EXPECT_DOUBLE_EQ(H(1, 1), 2.0);
}

TEST(GdnDeltaRule, StoresTheValueForAUnitKeyWhenBetaIsOne) {
  MatD H = MatD::Zero(3, 2);
  VecD k(3), v(2);
  k << 0, 1, 0;
  v << 7, -2;
  delta_rule(H, k, v, 1.0, 1.0);
  const VecD read = H.transpose() * k;  // reading with the same key returns v
  EXPECT_DOUBLE_EQ(read[0], 7);
  EXPECT_DOUBLE_EQ(read[1], -2);
}

TEST(GdnOutputNorm, SiluAndSigmoidGates) {
  LayerSpec s;
  s.vd = 2;
  LayerWeights w;
  w.norm_w = {1.0f, 2.0f};
  VecD o(2);
  o << 1, -1;
  const float z[2] = {0.0f, 10.0f};
  const double r = 1.0 / std::sqrt(1.0 + 1e-6);
  const double sig10 = 1.0 / (1.0 + std::exp(-10.0));
  VecD out = output_norm(s, w, o, z);
  EXPECT_DOUBLE_EQ(out[0], 0.0);  // silu(0) = 0
  EXPECT_NEAR(out[1], -1.0 * r * 2.0 * 10.0 * sig10, 1e-13);
  s.output_gate = OutputGate::sigmoid;
  out = output_norm(s, w, o, z);
  EXPECT_NEAR(out[0], r * 0.5, 1e-15);
  EXPECT_NEAR(out[1], -r * 2.0 * sig10, 1e-14);
}

}  // namespace ssm::ref
