// The reference's FP16 head loads and stores (reference/head_store.cpp) give the same bits, the
// same widened values and the same branch counts on the F16C path as on core/half.h's portable
// one: on every half, on the floats beside every half, on every rounding boundary between two
// neighbouring halves (the midpoint and the floats beside it), on the counted branches (NaN,
// beyond +-65504, infinities) and on random float bit patterns (seed printed).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/half.h"
#include "reference/branches.h"
#include "reference/head_store.h"

namespace ssm::ref {
namespace {

constexpr uint64_t kSeed = 20261201;

std::vector<float> probe_floats() {
  std::vector<float> v;
  const float inf = std::numeric_limits<float>::infinity();
  for (uint32_t b = 0; b < 0x10000u; ++b) {
    const float f = half_to_float(uint16_t(b));
    v.push_back(f);
    if (!std::isfinite(f)) continue;
    v.push_back(std::nextafter(f, inf));
    v.push_back(std::nextafter(f, -inf));
    // the boundary to the next half up (in magnitude): exact in float (halves have 11 bits)
    const uint16_t up = uint16_t(b + 1);
    if ((b & 0x7fffu) < 0x7bffu) {
      const float mid = float((double(f) + double(half_to_float(up))) / 2);
      v.push_back(mid);
      v.push_back(std::nextafter(mid, inf));
      v.push_back(std::nextafter(mid, -inf));
    }
  }
  for (float f : {65504.0f, 65519.99f, 65520.0f, 1e9f, std::numeric_limits<float>::max(),
                  std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::min(), 0x1p-25f,
                  0x1.000002p-25f, 0x1.fffffep-26f, inf})
    for (float s : {1.0f, -1.0f}) v.push_back(s * f);
  for (uint32_t nan : {0x7fc00000u, 0x7f800001u, 0xffc00123u, 0x7fffffffu}) {
    float f;
    std::memcpy(&f, &nan, 4);
    v.push_back(f);
  }
  std::cout << "head_store_test seed " << kSeed << "\n";
  std::mt19937_64 rng(kSeed);
  for (int i = 0; i < 1000000; ++i) {
    const uint32_t bits = uint32_t(rng());
    float f;
    std::memcpy(&f, &bits, 4);
    v.push_back(f);
  }
  return v;
}

struct Stored {
  std::vector<uint16_t> bits;
  MatD widened;
  std::array<int64_t, kBranches> branches{};
};

Stored store(bool f16c, F16Store kind, const MatD& H) {
  detail::set_f16c_path(f16c);
  Tensor t = Tensor::zeros(DType::f16, {H.rows(), H.cols()});
  take_branch_counts();
  Stored s;
  s.widened = store_head(kind, t, 0, H);
  s.branches = take_branch_counts();
  s.bits.assign(t.f16(), t.f16() + t.size());
  detail::set_f16c_path(true);
  return s;
}

bool same_bits(const MatD& a, const MatD& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), sizeof(double) * size_t(a.size())) == 0;
}

TEST(HeadStore, F16cPathGivesThePortableBitsAndCounts) {
  if (!detail::set_f16c_path(true)) GTEST_SKIP() << "this CPU has no F16C: the portable path is the only one";
  const std::vector<float> v = probe_floats();
  MatD H(1, Eigen::Index(v.size()));
  for (size_t i = 0; i < v.size(); ++i) H(0, Eigen::Index(i)) = v[i];
  for (F16Store kind : {F16Store::saturate, F16Store::inf}) {
    const Stored hw = store(true, kind, H), portable = store(false, kind, H);
    ASSERT_EQ(hw.bits.size(), portable.bits.size());
    for (size_t i = 0; i < v.size(); ++i)
      ASSERT_EQ(hw.bits[i], portable.bits[i]) << "element " << i << " = " << v[i] << " (" << std::hexfloat << v[i]
                                              << "), store " << (kind == F16Store::saturate ? "saturate" : "inf");
    EXPECT_TRUE(same_bits(hw.widened, portable.widened));
    EXPECT_EQ(hw.branches, portable.branches);
    // the probes reach both counted branches
    EXPECT_GT(portable.branches[size_t(Branch::f16_store_nan)], 0);
    EXPECT_GT(portable.branches[size_t(Branch::f16_store_clamp)], 0);
  }
}

TEST(HeadStore, F16cLoadWidensEveryHalfAsThePortableOne) {
  if (!detail::set_f16c_path(true)) GTEST_SKIP() << "this CPU has no F16C: the portable path is the only one";
  Tensor t = Tensor::zeros(DType::f16, {256, 256});
  for (uint32_t b = 0; b < 0x10000u; ++b) t.f16()[b] = uint16_t(b);
  const MatD hw = load_head(t, 0, 256, 256);
  detail::set_f16c_path(false);
  const MatD portable = load_head(t, 0, 256, 256);
  detail::set_f16c_path(true);
  EXPECT_TRUE(same_bits(hw, portable));
  // a head at an offset reads its own block
  const MatD part = load_head(t, 512, 2, 3);
  EXPECT_EQ(part(1, 2), double(half_to_float(uint16_t(512 + 5))));
}

// Short heads at every offset: the F16C path's groups of 4 and 8, its one-at-a-time tails, and a
// group with one value beyond the range or NaN among values within it, against the portable path.
TEST(HeadStore, F16cPathGivesThePortableBitsForEveryLengthAndOffset) {
  if (!detail::set_f16c_path(true)) GTEST_SKIP() << "this CPU has no F16C: the portable path is the only one";
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> pool = {1.5,     -0.333333333333, 65504.0, -65519.0, 7e4,    nan,  1e-7,
                                    6.1e-5,  -2.0,            0.1,     65520.0,  -1e-30, 3.25, -65504.0};
  Tensor h16 = Tensor::zeros(DType::f16, {64});
  for (int64_t b = 0; b < 64; ++b) h16.f16()[b] = uint16_t(0x3c00 + 37 * b);  // widened below
  int cases = 0;
  for (int n = 1; n <= 19; ++n) {
    for (int base = 0; base < 4; ++base) {
      MatD H(1, n);
      for (int e = 0; e < n; ++e) H(0, e) = pool[size_t(e * 5 + base + n) % pool.size()];
      for (F16Store kind : {F16Store::saturate, F16Store::inf}) {
        Tensor a = Tensor::zeros(DType::f16, {32}), b = Tensor::zeros(DType::f16, {32});
        detail::set_f16c_path(true);
        take_branch_counts();
        const MatD wa = store_head(kind, a, base, H);
        const auto ca = take_branch_counts();
        detail::set_f16c_path(false);
        const MatD wb = store_head(kind, b, base, H);
        const auto cb = take_branch_counts();
        detail::set_f16c_path(true);
        const std::string at = "n=" + std::to_string(n) + " base=" + std::to_string(base);
        ASSERT_EQ(std::memcmp(a.f16(), b.f16(), 64), 0) << at;  // and nothing outside the head written
        ASSERT_TRUE(same_bits(wa, wb)) << at;
        ASSERT_EQ(ca, cb) << at;
      }
      const MatD la = load_head(h16, base, 1, n);
      detail::set_f16c_path(false);
      const MatD lb = load_head(h16, base, 1, n);
      detail::set_f16c_path(true);
      ASSERT_TRUE(same_bits(la, lb)) << "load n=" << n << " base=" << base;
      ++cases;
    }
  }
  EXPECT_EQ(cases, 19 * 4);
}

}  // namespace
}  // namespace ssm::ref
