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

}  // namespace
}  // namespace ssm::ref
