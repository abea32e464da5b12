// The output conditions cover FP32 underflow (reference/underflow.h): a head whose products lie
// below FP32's subnormal spacing, computed the way the CUDA row kernels compute it (a chain of
// fused multiply-adds in FP32), stays within u * S of the FP64 value for every row, S the
// reference's first-order bound (mamba2_ssm_output_condition, gdn_output_dot_condition), with no
// class factor; and without the underflow share of S it would not (the share is needed, not slack).
// Terms that are all exactly zero keep an all-zero condition (what certifies an all-zero output).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>

#include "reference/gdn_math.h"
#include "reference/mamba2_math.h"
#include "reference/underflow.h"

namespace ssm::test {
namespace {

using ref::MatD;
using ref::VecD;
constexpr double kU = 0x1p-24;

// Values of FP16 state (exact in FP32) and subnormal-scale factors (exact in FP32 too).
double state_value(std::mt19937_64& rng) {
  const double v = std::ldexp(std::uniform_real_distribution<double>(0.5, 1.0)(rng),
                              std::uniform_int_distribution<int>(-10, 0)(rng));
  return double(float(rng() & 1 ? v : -v));
}
double tiny_value(std::mt19937_64& rng) {
  const double v = std::ldexp(std::uniform_real_distribution<double>(0.5, 1.0)(rng),
                              std::uniform_int_distribution<int>(-146, -130)(rng));
  return double(float(rng() & 1 ? v : -v));
}

// The worst error of the FP32 values against the bound, with and without the underflow share.
struct Worst {
  double ratio = 0;           // max |d| / (u S)
  double ratio_no_floor = 0;  // the same with S less its underflow share
  void note(double d, double S, int products) {
    ratio = std::max(ratio, d / (kU * S));
    ratio_no_floor = std::max(ratio_no_floor, d / (kU * (S - double(products) * ref::kUnderflowPerProduct)));
  }
  void expect(const char* what) const {
    std::printf("%s: max |d| / (u S) = %.3g; without the underflow share %.3g\n", what, ratio, ratio_no_floor);
    EXPECT_LE(ratio, 1.0) << what;
    EXPECT_GT(ratio_no_floor, 1.0) << what;
  }
};

// A random matrix of FP16 state values.
MatD state_matrix(std::mt19937_64& rng, int rows, int cols) {
  MatD H(rows, cols);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) H(i, j) = state_value(rng);
  return H;
}
VecD tiny_vector(std::mt19937_64& rng, int n) {
  VecD v(n);
  for (int i = 0; i < n; ++i) v[i] = tiny_value(rng);
  return v;
}

TEST(UnderflowCondition, Mamba2OutputOfUnderflowingProducts) {
  const uint64_t seed = 20261203;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Worst w;
  for (int trial = 0; trial < 50; ++trial) {
    const int hp = 7, ns = 97;
    const MatD H = state_matrix(rng, hp, ns);
    const VecD C = tiny_vector(rng, ns), x = tiny_vector(rng, hp);
    const double D = 1.0;
    const VecD exact = ref::mamba2_ssm_output(H, C, x, D);
    const VecD S = ref::mamba2_ssm_output_condition(H, C, x, D);
    for (int p = 0; p < hp; ++p) {
      float acc = 0.0f;  // cuda/mamba2_rows.cu: acc = fma(H, C, acc) over n, then y = fma(D, x, acc)
      for (int n = 0; n < ns; ++n) acc = std::fmaf(float(H(p, n)), float(C[n]), acc);
      w.note(std::fabs(double(std::fmaf(float(D), float(x[p]), acc)) - exact[p]), S[p], ns + 1);
    }
  }
  w.expect("Mamba-2");
}

TEST(UnderflowCondition, GdnOutputOfUnderflowingProducts) {
  const uint64_t seed = 20261204;
  std::printf("seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  Worst w;
  for (int trial = 0; trial < 50; ++trial) {
    const int kd = 33, vd = 17;
    const MatD H = state_matrix(rng, kd, vd);
    const VecD q = tiny_vector(rng, kd);
    const double qscale = 1.0;  // a power of two in the kernels' use (1/sqrt(kd) is applied to q): exact
    const VecD exact = H.transpose() * q * qscale;
    const VecD S = ref::gdn_output_dot_condition(H, q, qscale);
    for (int j = 0; j < vd; ++j) {
      float acc = 0.0f;
      for (int i = 0; i < kd; ++i) acc = std::fmaf(float(H(i, j)), float(q[i]), acc);
      w.note(std::fabs(double(acc) - exact[j]), S[j], kd + 1);
    }
  }
  w.expect("GDN");
}

TEST(UnderflowCondition, ExactlyZeroTermsKeepAZeroCondition) {
  const MatD H = MatD::Zero(3, 5);
  const VecD C = VecD::Constant(5, 1e-40), x = VecD::Zero(3), q = VecD::Constant(3, 1e-40);
  EXPECT_EQ(ref::mamba2_ssm_output_condition(H, C, x, 1.0), VecD::Zero(3));
  EXPECT_EQ(ref::gdn_output_dot_condition(H, q, 1.0), VecD::Zero(5));
  // one nonzero term: the relative part and the whole underflow share
  MatD H1 = H;
  H1(1, 2) = 0.5;
  const VecD S = ref::mamba2_ssm_output_condition(H1, C, x, 1.0);
  EXPECT_GT(S[0], 6 * ref::kUnderflowPerProduct);  // rms(H) > 0 reaches every row
  EXPECT_LT(S[0], 7 * ref::kUnderflowPerProduct);
}

}  // namespace
}  // namespace ssm::test
