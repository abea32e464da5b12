// Tolerance classes on crafted inputs (compare/compare.h): ULP distance, an off-by-one ULP, a
// single NaN/Inf, one wrong element in a 1M-element tensor, all-zero references, elementwise
// bounds, the normalised error, overrides, and the report forms.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include <fmt/core.h>

#include "compare/compare.h"
#include "core/state.h"

namespace ssm::cmp {
namespace {

Tensor random_f32(std::vector<int64_t> shape, uint64_t seed, float lo = -1, float hi = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t = Tensor::zeros(DType::f32, std::move(shape));
  for (int64_t i = 0; i < t.size(); ++i) t.f32()[i] = u(rng);
  return t;
}

Tensor random_f16(std::vector<int64_t> shape, uint64_t seed) {
  const Tensor f = random_f32(shape, seed);
  Tensor t = Tensor::zeros(DType::f16, shape);
  for (int64_t i = 0; i < t.size(); ++i) t.f16()[i] = float_to_half_rne(f.f32()[i]);
  return t;
}

int64_t flat(const std::vector<int64_t>& shape, const std::vector<int64_t>& idx) {
  int64_t i = 0;
  for (size_t d = 0; d < shape.size(); ++d) i = i * shape[d] + idx[d];
  return i;
}

Where where_h() {
  Where w;
  w.op_index = 3;
  w.op = "verify 4";
  w.seq = 0;
  w.slot = 1;
  w.layer = 2;
  w.tensor = "h";
  return w;
}

// One FP16 step away from v on the ordered line, away from zero.
uint16_t next_half(uint16_t v) { return uint16_t(v + 1); }

TEST(compare_ulp, f16_distance_on_the_ordered_line) {
  EXPECT_EQ(ulp_distance_f16(0x3c00, 0x3c01), 1);  // 1.0 and its successor
  EXPECT_EQ(ulp_distance_f16(0x0000, 0x8000), 0);  // +0 and -0
  EXPECT_EQ(ulp_distance_f16(0x0001, 0x8001), 2);  // smallest subnormals either side of zero
  EXPECT_EQ(ulp_distance_f16(0x3bff, 0x3c00), 1);  // across a binade
  EXPECT_EQ(ulp_distance_f16(0x7bff, 0xfbff), 2 * 0x7bff);
  EXPECT_EQ(ulp_distance_f16(0xbc00, 0xbc02), 2);  // negative side
}

TEST(compare_ulp, f32_distance_on_the_ordered_line) {
  EXPECT_EQ(ulp_distance_f32(1.0f, std::nextafter(1.0f, 2.0f)), 1);
  EXPECT_EQ(ulp_distance_f32(0.0f, -0.0f), 0);
  EXPECT_EQ(ulp_distance_f32(std::nextafter(0.0f, 1.0f), -std::nextafter(0.0f, 1.0f)), 2);
}

TEST(compare_class, of_each_field) {
  EXPECT_EQ(class_of("h", DType::f16), TolClass::fp16_state);
  EXPECT_EQ(class_of("h", DType::f32), TolClass::fp32_state);
  EXPECT_EQ(class_of("h_checkpoint", DType::f16), TolClass::fp16_state);
  EXPECT_EQ(class_of("h_intermediate", DType::f32), TolClass::fp32_state);
  EXPECT_EQ(class_of("conv", DType::f32), TolClass::exact);
  EXPECT_EQ(class_of("conv_intermediate", DType::f32), TolClass::exact);
  EXPECT_EQ(class_of("h_prefill_stage", DType::f32), TolClass::fp32_state);
  EXPECT_EQ(class_of("output", DType::f32), TolClass::output);
  EXPECT_EQ(class_of("h", DType::f16, Strictness::bitwise), TolClass::exact);
  EXPECT_EQ(class_of("output", DType::f32, Strictness::bitwise), TolClass::exact);
  EXPECT_THROW(class_of("bogus", DType::f32), std::invalid_argument);
  EXPECT_EQ(class_of("output", DType::f16), TolClass::output_f16);
  for (TolClass c : {TolClass::exact, TolClass::fp16_state, TolClass::fp32_state, TolClass::output, TolClass::output_f16})
    EXPECT_EQ(parse_tol_class(to_string(c)), c);
}

TEST(compare_tensor, off_by_one_ulp_f16) {
  const uint64_t seed = 11;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const std::vector<int64_t> shape = {4, 16, 24};
  Tensor ref = random_f16(shape, seed);
  const int64_t i = flat(shape, {1, 2, 3});
  ref.f16()[i] = 0x3c00;  // 1.0: above rms(ref), so its own ULP is the unit
  Tensor got = ref;
  got.f16()[i] = next_half(ref.f16()[i]);
  const Tolerances tol = Tolerances::defaults();

  const TensorReport ex = compare_tensor(ref, got, TolClass::exact, tol, where_h());
  EXPECT_FALSE(ex.pass);
  EXPECT_EQ(ex.mismatched, 1);
  ASSERT_FALSE(ex.worst.empty());
  EXPECT_EQ(ex.worst[0].index, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(ex.worst[0].ulp, 1);
  EXPECT_EQ(ex.worst[0].ref_bits, ref.f16()[i]);
  EXPECT_EQ(ex.worst[0].got_bits, got.f16()[i]);

  const TensorReport cl = compare_tensor(ref, got, TolClass::fp16_state, tol, where_h());
  EXPECT_TRUE(cl.pass) << cl.text();
  EXPECT_EQ(cl.max_ulp, 1);
  EXPECT_EQ(cl.max_ulp_scaled, 1);

  Tolerances zero = tol;
  zero.override_from("fp16-state.max_ulp=0");
  const TensorReport z = compare_tensor(ref, got, TolClass::fp16_state, zero, where_h());
  EXPECT_FALSE(z.pass);
  EXPECT_EQ(z.smallest_passing.max_ulp, 1);
  EXPECT_NE(z.text().find("(1, 2, 3)"), std::string::npos) << z.text();

  // max_ulp + 1 away fails under the defaults
  got.f16()[i] = uint16_t(ref.f16()[i] + uint16_t(tol.fp16_state.max_ulp) + 1);
  const TensorReport far = compare_tensor(ref, got, TolClass::fp16_state, tol, where_h());
  EXPECT_FALSE(far.pass);
  EXPECT_EQ(far.mismatched, 1);
}

TEST(compare_tensor, fp16_ulps_of_small_elements_count_at_the_tensor_scale) {
  // ref: one element at 1.0, the rest tiny. An error of one ULP-at-1.0 on a tiny element is
  // 1024+ of its own ULPs but one ULP at the tensor's scale (what FP16 rounding leaks there).
  Tensor ref = Tensor::zeros(DType::f16, {1, 4, 4});
  for (int64_t i = 0; i < ref.size(); ++i) ref.f16()[i] = float_to_half_rne(1e-4f * float(i + 1));
  ref.f16()[0] = 0x3c00;  // rms(ref) = 0.25 (about), ULP there 2^-12
  Tensor got = ref;
  got.f16()[9] = float_to_half_rne(half_to_float(ref.f16()[9]) + 0.000244140625f);  // + 2^-12
  const TensorReport r = compare_tensor(ref, got, TolClass::fp16_state, Tolerances::defaults(), where_h());
  EXPECT_TRUE(r.pass) << r.text();
  EXPECT_GT(r.max_ulp, 100);
  EXPECT_LE(r.max_ulp_scaled, 1.01);
  EXPECT_EQ(half_ulp_at(1.0), 1.0 / 1024);
  EXPECT_EQ(half_ulp_at(0.75), 1.0 / 2048);
  EXPECT_EQ(half_ulp_at(1e-7), 1.0 / (1 << 24));
}

TEST(compare_tensor, off_by_one_ulp_f32_is_exact_failure_and_fp32_pass) {
  const uint64_t seed = 12;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Tensor ref = random_f32({3, 5, 7}, seed);
  Tensor got = ref;
  got.f32()[17] = std::nextafter(ref.f32()[17], 10.0f);
  const Tolerances tol = Tolerances::defaults();
  EXPECT_FALSE(compare_tensor(ref, got, TolClass::exact, tol, where_h()).pass);
  EXPECT_TRUE(compare_tensor(ref, got, TolClass::fp32_state, tol, where_h()).pass);
  // -0 vs +0: identical value, different bits
  Tensor z = ref;
  z.f32()[0] = 0.0f;
  Tensor nz = z;
  nz.f32()[0] = -0.0f;
  EXPECT_FALSE(compare_tensor(z, nz, TolClass::exact, tol, where_h()).pass);
  EXPECT_TRUE(compare_tensor(z, nz, TolClass::fp32_state, tol, where_h()).pass);
}

// half_ulp_at reads the exponent bits inline (the fp16-state loop calls it per element); it is
// half_ulp_at_frexp, bit for bit.
TEST(HalfUlp, InlineIsTheFrexpFunction) {
  // every power of two from 2^-160 to 2^140 and its neighbours, both signs, zero, the extremes,
  // NaN, infinity and 2^20 random doubles (seed printed)
  auto same = [](double x) {
    const double a = half_ulp_at(x), b = half_ulp_at_frexp(x);
    return std::memcmp(&a, &b, 8) == 0;
  };
  std::vector<double> edge = {0.0, 6.103515625e-05, std::nextafter(6.103515625e-05, 0.0), 65504.0, 1.0, 0.5,
                              std::numeric_limits<double>::max(), std::numeric_limits<double>::min(),
                              std::numeric_limits<double>::denorm_min(), std::numeric_limits<double>::infinity(),
                              std::numeric_limits<double>::quiet_NaN()};
  for (int e = -160; e <= 140; ++e) {
    const double p = std::ldexp(1.0, e);
    edge.insert(edge.end(), {p, std::nextafter(p, 0.0), std::nextafter(p, 2 * p)});
  }
  for (double x : edge) {
    EXPECT_TRUE(same(x)) << x;
    EXPECT_TRUE(same(-x)) << -x;
  }
  const uint64_t seed = 20261202;
  std::printf("half_ulp_at: random doubles, seed %llu\n", (unsigned long long)seed);
  std::mt19937_64 rng(seed);
  int64_t differ = 0;
  for (int i = 0; i < (1 << 20); ++i) {
    const uint64_t bits = rng();
    double x;
    std::memcpy(&x, &bits, 8);
    differ += !same(x);
  }
  EXPECT_EQ(differ, 0);
}

TEST(compare_tensor, single_nan_fails_first_and_says_where) {
  const uint64_t seed = 13;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const std::vector<int64_t> shape = {2, 8, 12};
  const Tensor ref = random_f32(shape, seed);
  Tensor got = ref;
  got.f32()[flat(shape, {1, 7, 11})] = std::nanf("");
  for (TolClass c : {TolClass::exact, TolClass::fp32_state, TolClass::output}) {
    Tolerances loose = Tolerances::defaults();
    if (c != TolClass::exact) loose.of(c) = Tolerance{1e9, 1e9, 1e9, 1e9};  // no metric could fail
    const TensorReport r = compare_tensor(ref, got, c, loose, where_h());
    EXPECT_FALSE(r.pass) << to_string(c);
    EXPECT_NE(r.failure.find("non-finite"), std::string::npos) << r.failure;
    EXPECT_NE(r.failure.find("in got"), std::string::npos) << r.failure;
    EXPECT_NE(r.failure.find("(head 1, row 7, col 11)"), std::string::npos) << r.failure;
    EXPECT_FALSE(r.measured);
  }
  // On the side judged against: an error of that side, named as such (Where names the sides).
  Where w = where_h();
  w.ref_side = "trace";
  w.got_side = "cuda";
  const TensorReport rr = compare_tensor(got, ref, TolClass::fp32_state, Tolerances::defaults(), w);
  EXPECT_FALSE(rr.pass);
  EXPECT_NE(rr.failure.find("in trace without the same value"), std::string::npos) << rr.failure;
}

// Reports say what each side is: "trace is all zero ... but cuda has ..." in replay, never the
// bare "ref"/"got" that meant opposite things on one screen (issue 14, item 1).
TEST(compare_tensor, the_sides_are_named_in_messages_reports_and_json) {
  Where w = where_h();
  w.ref_side = "trace";
  w.got_side = "cuda";
  const Tensor zero = Tensor::zeros(DType::f32, {2, 4, 4});
  Tensor got = zero;
  got.f32()[3] = 0.5f;
  const TensorReport r = compare_tensor(zero, got, TolClass::fp32_state, Tolerances::defaults(), w, true);
  EXPECT_FALSE(r.pass);
  EXPECT_NE(r.failure.find("trace is all zero (an untouched field) but cuda has 1 non-zero element"), std::string::npos)
      << r.failure;
  EXPECT_NE(r.text().find(": trace 0 [0x00000000] cuda 0.5 [0x3f000000]"), std::string::npos) << r.text();
  EXPECT_EQ(r.json().at("sides").at("ref"), "trace");
  EXPECT_EQ(r.json().at("sides").at("got"), "cuda");
}

TEST(compare_tensor, single_inf_in_f16) {
  const uint64_t seed = 14;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Tensor ref = random_f16({2, 4, 4}, seed);
  Tensor got = ref;
  got.f16()[5] = 0xfc00;  // -inf
  const TensorReport r = compare_tensor(ref, got, TolClass::fp16_state, Tolerances::defaults(), where_h());
  EXPECT_FALSE(r.pass);
  EXPECT_NE(r.failure.find("non-finite"), std::string::npos);
  EXPECT_NE(r.failure.find("(head 0, row 1, col 1)"), std::string::npos) << r.failure;
}

// The converter overflows to inf (STATE-MODEL section 6): a state where both sides hold the same
// inf is faithful; found as a false alarm by the first f16-pool H200 campaign (odd-d, value
// scale 60000: `alloc; decode; verify 3; prefill 2` narrowed an element beyond 65504).
TEST(compare_tensor, the_same_inf_on_both_sides_is_matched_a_different_one_is_not) {
  const uint64_t seed = 16;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Tensor ref = random_f16({2, 4, 4}, seed);
  ref.f16()[5] = 0x7c00;  // +inf
  Tensor got = ref;
  TensorReport r = compare_tensor(ref, got, TolClass::fp16_state, Tolerances::defaults(), where_h());
  EXPECT_TRUE(r.pass) << r.text();
  EXPECT_EQ(r.non_finite_matched, 1);
  EXPECT_TRUE(r.measured);
  got.f16()[5] = 0xfc00;  // -inf: not the same value
  r = compare_tensor(ref, got, TolClass::fp16_state, Tolerances::defaults(), where_h());
  EXPECT_FALSE(r.pass);
  EXPECT_NE(r.failure.find("non-finite"), std::string::npos) << r.failure;
  got.f16()[5] = 0x7bfe;  // 65472: finite where the reference overflowed, below the boundary pair
  r = compare_tensor(ref, got, TolClass::fp16_state, Tolerances::defaults(), where_h());
  EXPECT_FALSE(r.pass);
  EXPECT_NE(r.failure.find("in ref without the same value"), std::string::npos) << r.failure;
  // NaN against NaN in an output (a step on inf state) is matched too; finite elements still judged
  Tensor o = random_f32({1, 2, 8}, seed), og = o;
  o.f32()[3] = og.f32()[3] = std::nanf("");
  EXPECT_TRUE(compare_tensor(o, og, TolClass::output, Tolerances::defaults(), where_h()).pass);
  // all NaN on both sides (a prefill on a widened inf state, found by a value-scale 2e5 campaign:
  // `alloc; decode; prefill 3; to_f16; prefill 1` on tiny) is matched; one finite value on a side is not
  Tensor all = o;
  for (int64_t i = 0; i < all.size(); ++i) all.f32()[size_t(i)] = std::nanf("");
  EXPECT_TRUE(compare_tensor(all, all, TolClass::exact, Tolerances::defaults(), where_h()).pass);
  Tensor one = all;
  one.f32()[0] = 1.0f;
  EXPECT_FALSE(compare_tensor(all, one, TolClass::exact, Tolerances::defaults(), where_h()).pass);
  og.f32()[4] *= 1.5f;
  EXPECT_FALSE(compare_tensor(o, og, TolClass::output, Tolerances::defaults(), where_h()).pass);
}

// FP16's overflow boundary: round to nearest even sends 65520 (the midpoint between 65504 and 2^16)
// and above to inf, so pre-store values one FP32 rounding apart can store as inf and 65504. Found
// by `ssmcheck fuzz --backend cuda --preset mamba-wide --seed 1`, case 218: one FP16 h element inf
// in the reference (pre-store 65520.004 = 65520 + 2^-8) and 65504 on CUDA. In fp16-state the pair
// (either side inf, the same sign) is one FP16 step, which the class admits: matched. Nothing else
// is: the other sign, any other finite value, a class that does not admit one step (exact), an
// FP32 tensor.
TEST(compare_tensor, fp16_overflow_boundary_pair_is_one_step) {
  const uint64_t seed = 17;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Tolerances tol = Tolerances::defaults();
  Tensor ref = random_f16({2, 4, 4}, seed);
  ref.f16()[5] = 0x7c00;   // +inf: the reference's pre-store value was at or past 65520
  ref.f16()[9] = 0xfc00;   // -inf
  Tensor got = ref;
  got.f16()[5] = 0x7bff;   // +65504: got's pre-store value just below 65520
  got.f16()[9] = 0xfbff;   // -65504
  TensorReport r = compare_tensor(ref, got, TolClass::fp16_state, tol, where_h());
  EXPECT_TRUE(r.pass) << r.text();
  EXPECT_EQ(r.overflow_boundary, 2);
  EXPECT_EQ(r.non_finite_matched, 0);
  EXPECT_TRUE(r.measured);
  EXPECT_DOUBLE_EQ(r.error_ratio, 1.0 / tol.fp16_state.max_ulp);  // one FP16 ULP against max_ulp
  EXPECT_EQ(r.json().at("overflow_boundary"), 2);
  // the other way round: the reference below the threshold, got across it
  r = compare_tensor(got, ref, TolClass::fp16_state, tol, where_h());
  EXPECT_TRUE(r.pass) << r.text();
  EXPECT_EQ(r.overflow_boundary, 2);
  // the rest of the tensor is still judged
  Tensor off = got;
  off.f16()[0] = uint16_t(off.f16()[0] ^ 0x0200);
  EXPECT_FALSE(compare_tensor(ref, off, TolClass::fp16_state, tol, where_h()).pass);

  // the protection kept
  auto fails = [&](uint16_t ref_bits, uint16_t got_bits, TolClass cls, const Tolerances& t, const char* what) {
    Tensor a = random_f16({2, 4, 4}, seed), b = a;
    a.f16()[5] = ref_bits;
    b.f16()[5] = got_bits;
    const TensorReport x = compare_tensor(a, b, cls, t, where_h());
    EXPECT_FALSE(x.pass) << what << "\n" << x.text();
    EXPECT_NE(x.failure.find("non-finite"), std::string::npos) << what << ": " << x.failure;
    EXPECT_EQ(x.overflow_boundary, 0) << what;
  };
  fails(0x7c00, 0xfbff, TolClass::fp16_state, tol, "+inf vs -65504");
  fails(0xfc00, 0x7bff, TolClass::fp16_state, tol, "-inf vs +65504");
  fails(0x7c00, 0x7bfe, TolClass::fp16_state, tol, "+inf vs 65472 (one ULP below 65504)");
  fails(0x7c00, 0x3c00, TolClass::fp16_state, tol, "+inf vs 1");
  fails(0x7bff, 0x7e00, TolClass::fp16_state, tol, "65504 vs NaN");
  fails(0x7c00, 0x7bff, TolClass::exact, tol, "exact admits no step");
  Tolerances tight = tol;
  tight.fp16_state.max_ulp = 0.5;  // less than the one step (atol, rtol 0)
  fails(0x7c00, 0x7bff, TolClass::fp16_state, tight, "a class that does not admit one FP16 step");
  // FP32 data (a widened field judged as FP16 lineage): the pair is an FP16 field's only
  Tensor f = random_f32({2, 4, 4}, seed), fg = f;
  f.f32()[5] = std::numeric_limits<float>::infinity();
  fg.f32()[5] = 65504.0f;
  EXPECT_FALSE(compare_tensor(f, fg, TolClass::fp16_state, tol, where_h()).pass);
}

TEST(compare_tensor, one_wrong_element_in_a_million) {
  const uint64_t seed = 15;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const std::vector<int64_t> shape = {64, 128, 128};  // 1,048,576 elements
  const Tensor ref = random_f32(shape, seed, 0.5f, 1.0f);
  Tensor got = ref;
  const int64_t i = flat(shape, {37, 99, 5});
  got.f32()[i] = ref.f32()[i] * 1.01f;
  const TensorReport r = compare_tensor(ref, got, TolClass::fp32_state, Tolerances::defaults(), where_h());
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.elements, 1 << 20);
  EXPECT_EQ(r.mismatched, 1);
  ASSERT_FALSE(r.worst.empty());
  EXPECT_EQ(r.worst[0].index, (std::vector<int64_t>{37, 99, 5}));
  EXPECT_NEAR(r.worst[0].rel_err, 0.01, 1e-6);
  EXPECT_LT(r.nrmse, Tolerances::defaults().fp32_state.max_nrmse);  // caught elementwise, not by the norm
  double sq = 0;
  for (int64_t k = 0; k < ref.size(); ++k) sq += double(ref.get(k)) * ref.get(k);
  const double rscale = std::max(std::fabs(r.worst[0].ref), std::sqrt(sq / double(ref.size())));
  EXPECT_NEAR(r.smallest_passing.atol, r.worst[0].abs_err - 1e-4 * rscale, 1e-9);  // rtol at scale
  const std::string text = r.text();
  EXPECT_NE(text.find("1 / 1048576"), std::string::npos) << text;
  EXPECT_NE(text.find("(37, 99, 5)"), std::string::npos) << text;
  EXPECT_LT(text.size(), 2000u) << "a report never prints a whole tensor";
  int64_t total = 0;
  for (int64_t n : r.histogram) total += n;
  EXPECT_EQ(total, r.elements);
}

// An all-zero reference is refused where a tolerance could accept small garbage against it; got
// bit for bit identical uses no tolerance and is an agreement in every class. Found by `ssmcheck
// fuzz --seed 3 --cases 3000`, case 2955: `check --preset mamba-odd-c --h-mode f16-pool --slots 2
// --capacity 0,0 --conv-capacity 0 --snapshots 2 --seed 937742473 --decay 1 --value-scale 2000
// --ops "alloc; prefill 1"` against the alternate path (class exact): layer 3's output all zero
// on both sides, bit for bit, was refused as "nothing would be checked".
TEST(compare_tensor, all_zero_reference) {
  const Tensor zero = Tensor::zeros(DType::f32, {2, 3, 4});
  const Tolerances tol = Tolerances::defaults();
  for (TolClass c : {TolClass::exact, TolClass::fp32_state, TolClass::output, TolClass::output_f16}) {
    const TensorReport same = compare_tensor(zero, zero, c, tol, where_h());
    EXPECT_TRUE(same.pass) << "identical bits are an agreement (" << to_string(c) << "): " << same.text();
    EXPECT_TRUE(same.zero_ref);
    EXPECT_EQ(same.error_ratio, 0.0);
    // ...with the elementwise loop too (the shortcut for identical sides is not what decides)
    detail::set_identical_fast_path(false);
    EXPECT_TRUE(compare_tensor(zero, zero, c, tol, where_h()).pass) << to_string(c);
    detail::set_identical_fast_path(true);
  }
  // The protection kept: got not identical to an all-zero reference, even within atol (or a zero
  // of the other sign), is refused in every tolerance class: the tolerance would pass it vacuously.
  for (TolClass c : {TolClass::fp32_state, TolClass::output, TolClass::output_f16}) {
    for (const float v : {1e-9f, -0.0f}) {
      Tensor near = zero;
      near.f32()[7] = v;
      const TensorReport r = compare_tensor(zero, near, c, tol, where_h());
      EXPECT_FALSE(r.pass) << "an all-zero reference must not pass vacuously (" << to_string(c) << ", got " << v << ")";
      EXPECT_NE(r.failure.find("is all zero: nothing would be checked"), std::string::npos) << r.failure;
    }
  }
  Tensor one = zero;
  one.f32()[7] = 1e-9f;
  EXPECT_FALSE(compare_tensor(zero, one, TolClass::exact, tol, where_h()).pass);
  // Legitimately zero (fresh state): passes only against zeros.
  EXPECT_TRUE(compare_tensor(zero, zero, TolClass::fp32_state, tol, where_h(), true).pass);
  Tensor tiny = zero;
  tiny.f32()[7] = 1e-9f;  // would be inside atol, but an untouched field must stay zero
  const TensorReport r = compare_tensor(zero, tiny, TolClass::fp32_state, tol, where_h(), true);
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.mismatched, 1);
  EXPECT_EQ(r.worst.at(0).index, (std::vector<int64_t>{0, 1, 3}));
  const Tensor zero16 = Tensor::zeros(DType::f16, {2, 3, 4});
  EXPECT_TRUE(compare_tensor(zero16, zero16, TolClass::fp16_state, tol, where_h()).pass);
  EXPECT_TRUE(compare_tensor(zero16, zero16, TolClass::fp16_state, tol, where_h(), true).pass);
  Tensor sub16 = zero16;
  sub16.f16()[3] = 0x0001;  // the smallest subnormal: 1 ULP, within max_ulp, still refused
  EXPECT_FALSE(compare_tensor(zero16, sub16, TolClass::fp16_state, tol, where_h()).pass);
}

TEST(compare_tensor, elementwise_bound_edges_and_smallest_passing) {
  Tensor ref = Tensor::zeros(DType::f32, {4});
  ref.f32()[0] = 1.0f;
  ref.f32()[1] = -2.0f;
  ref.f32()[2] = 4.0f;
  ref.f32()[3] = 0.5f;
  Tolerances tol = Tolerances::defaults();
  tol.output = Tolerance{0.01, 0.1, 0, 1.0};
  Tensor got = ref;
  got.f32()[2] = 4.0f + 0.40f;  // bound 0.01 + 0.4 = 0.41: inside
  Where w = where_h();
  w.tensor = "x";
  EXPECT_TRUE(compare_tensor(ref, got, TolClass::output, tol, w).pass);
  got.f32()[2] = 4.0f + 0.42f;  // outside by 0.01
  const TensorReport r = compare_tensor(ref, got, TolClass::output, tol, w);
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.mismatched, 1);
  EXPECT_EQ(r.worst.at(0).index, (std::vector<int64_t>{2}));
  EXPECT_NEAR(r.smallest_passing.atol, 0.42 - 0.4, 1e-6);    // rtol 0.1 kept
  EXPECT_NEAR(r.smallest_passing.rtol, (0.42 - 0.01) / 4, 1e-6);  // atol 0.01 kept
  // the suggested tolerance passes
  Tolerances fixed = tol;
  fixed.output.atol = r.smallest_passing.atol * 1.0001;
  EXPECT_TRUE(compare_tensor(ref, got, TolClass::output, fixed, w).pass);
}

TEST(compare_tensor, normalised_error_fails_when_every_element_is_inside) {
  const uint64_t seed = 16;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  const Tensor ref = random_f32({8, 8, 8}, seed, 0.5f, 1.0f);
  Tensor got = ref;
  for (int64_t i = 0; i < got.size(); ++i) got.f32()[i] *= 1.0005f;  // inside rtol 1e-3, nrmse 5e-4 > 1e-4
  const TensorReport r = compare_tensor(ref, got, TolClass::output, Tolerances::defaults(), where_h());
  EXPECT_FALSE(r.pass);
  EXPECT_EQ(r.mismatched, 0);
  EXPECT_NEAR(r.nrmse, 5e-4, 1e-5);
  EXPECT_NE(r.failure.find("normalised RMS"), std::string::npos) << r.failure;
  EXPECT_NEAR(r.smallest_passing.max_nrmse, r.nrmse, 1e-12);
}

TEST(compare_tensor, dtype_or_shape_mismatch_fails) {
  const Tensor a = random_f32({2, 3}, 1);
  const Tensor b = random_f16({2, 3}, 1);
  const Tensor c = random_f32({3, 2}, 1);
  EXPECT_FALSE(compare_tensor(a, b, TolClass::exact, Tolerances::defaults(), where_h()).pass);
  EXPECT_FALSE(compare_tensor(a, c, TolClass::fp32_state, Tolerances::defaults(), where_h()).pass);
}

// FP32 tensors that descend from FP16 state (f16 modes) are measured in FP16 ULPs at scale.
TEST(compare_tensor, fp16_state_on_fp32_values_counts_half_ulps_at_scale) {
  const Tensor a = random_f32({4, 8, 8}, 3);
  double sq = 0;
  for (int64_t i = 0; i < a.size(); ++i) sq += double(a.get(i)) * a.get(i);
  const double rms = std::sqrt(sq / double(a.size()));
  const int64_t at = 5;
  const double scale = std::max(std::fabs(double(a.get(at))), rms);
  for (const auto& [ulps, pass] : {std::pair<double, bool>{2.0, true}, {1000.0, false}}) {
    Tensor b = a;
    b.f32()[at] = float(a.get(at) + ulps * half_ulp_at(scale));
    const TensorReport r = compare_tensor(a, b, TolClass::fp16_state, Tolerances::defaults(), where_h());
    EXPECT_EQ(r.pass, pass) << ulps << " ULPs\n" << r.text();
    EXPECT_NEAR(r.max_ulp_scaled, ulps, 0.01 * ulps);
  }
}

TEST(compare_tolerances, overrides_from_spec_and_json) {
  Tolerances t = Tolerances::defaults();
  t.override_from("fp16-state.max_ulp=4, output.rtol=2e-3,fp32_state.max_nrmse=1e-6");
  EXPECT_EQ(t.fp16_state.max_ulp, 4);
  EXPECT_EQ(t.output.rtol, 2e-3);
  EXPECT_EQ(t.fp32_state.max_nrmse, 1e-6);
  t.override_from_json(nlohmann::json::parse(R"({"output": {"atol": 0.5}, "fp16-state": {"max_nrmse": 0.01}})"));
  EXPECT_EQ(t.output.atol, 0.5);
  EXPECT_EQ(t.fp16_state.max_nrmse, 0.01);
  EXPECT_EQ(t.fp16_state.max_ulp, 4);
  auto throws_naming = [](auto f, const std::string& needle) {
    try {
      f();
      ADD_FAILURE() << "no exception, expected one naming " << needle;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
    }
  };
  throws_naming([&] { t.override_from("output.bogus=1"); }, "bogus");
  throws_naming([&] { t.override_from("fp64-state.atol=1"); }, "fp64-state");
  throws_naming([&] { t.override_from("exact.atol=1"); }, "exact");
  throws_naming([&] { t.override_from("output.atol=-1"); }, "output.atol=-1");
  throws_naming([&] { t.override_from("output.atol=abc"); }, "abc");
  throws_naming([&] { t.override_from("output.atol"); }, "CLASS.KEY=VALUE");
  throws_naming([&] { t.override_from_json(nlohmann::json::parse(R"({"output": {"rtol": "x"}})")); }, "output.rtol");
  const Tolerances d = Tolerances::defaults();
  EXPECT_EQ(d.json()["fp16-state"]["max_ulp"], d.fp16_state.max_ulp);
}

TEST(compare_report, text_and_json_name_everything) {
  const uint64_t seed = 17;
  SCOPED_TRACE("seed=" + std::to_string(seed));
  Tensor ref = random_f16({2, 4, 8}, seed);
  for (int64_t i : {3, 9, 40}) ref.f16()[i] = 0x3c00;  // 1.0: above rms, own ULP is the unit
  Tensor got = ref;
  for (int64_t i : {3, 9, 40}) got.f16()[i] = uint16_t(got.f16()[i] + 7);
  Tolerances tol = Tolerances::defaults();
  tol.override_from("fp16-state.max_ulp=2");
  const TensorReport r = compare_tensor(ref, got, TolClass::fp16_state, tol, where_h());
  ASSERT_FALSE(r.pass);
  const std::string t = r.text();
  for (const char* needle : {"op 3 'verify 4'", "seq 0 (slot 1)", "layer 2", " h ", "fp16-state", "max_ulp 2",
                             "3 / 64", "(head, row, col)", "ulp 7 (at scale 7)", "histogram", "smallest passing",
                             "max_ulp >= 7"})
    EXPECT_NE(t.find(needle), std::string::npos) << "missing '" << needle << "' in\n" << t;
  const nlohmann::json j = r.json();
  EXPECT_EQ(j["class"], "fp16-state");
  EXPECT_EQ(j["op_index"], 3);
  EXPECT_EQ(j["layer"], 2);
  EXPECT_EQ(j["mismatched"], 3);
  EXPECT_EQ(j["worst"].size(), 3u);
  EXPECT_EQ(j["smallest_passing"]["max_ulp"], 7);
  EXPECT_EQ(j["histogram"]["<=8"], 3);
}

}  // namespace
}  // namespace ssm::cmp

namespace ssm::cmp {
namespace {

// The shortcut for bit-identical sides gives the very report the elementwise loop gives: every
// class, both dtypes, with and without a condition, an all-zero reference, matched non-finite
// elements (printed seeds; each case reproduces from its seed alone).
TEST(CompareTensor, IdenticalSidesShortcutGivesTheElementwiseReport) {
  const Tolerances tols = Tolerances::defaults();
  int cases = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed)
    for (TolClass cls : {TolClass::exact, TolClass::fp16_state, TolClass::fp32_state, TolClass::output,
                         TolClass::output_f16})
      for (bool f16 : {false, true})
        for (int variant = 0; variant < 3; ++variant) {  // 0 plain, 1 all zero, 2 with matched inf/NaN
          SCOPED_TRACE(fmt::format("seed {} class {} f16 {} variant {}", seed, to_string(cls), f16, variant));
          Tensor ref = f16 ? random_f16({3, 5, 7}, seed) : random_f32({3, 5, 7}, seed);
          if (variant == 1) ref = Tensor::zeros(ref.dtype(), ref.shape());
          if (variant == 2) {
            if (f16) {
              ref.f16()[4] = 0x7c00;  // +inf
              ref.f16()[9] = 0x7e00;  // NaN
            } else {
              ref.f32()[4] = std::numeric_limits<float>::infinity();
              ref.f32()[9] = std::numeric_limits<float>::quiet_NaN();
            }
          }
          const Tensor got = ref;
          const Tensor cond = random_f32({3, 5, 7}, seed + 100, 0, 4);
          for (const Tensor* c : {static_cast<const Tensor*>(nullptr), &cond}) {
            Where w;
            w.tensor = "h";
            detail::set_identical_fast_path(false);
            const TensorReport slow = compare_tensor(ref, got, cls, tols, w, variant == 1, c);
            detail::set_identical_fast_path(true);
            const TensorReport fast = compare_tensor(ref, got, cls, tols, w, variant == 1, c);
            EXPECT_EQ(fast.json().dump(), slow.json().dump());
            EXPECT_EQ(fast.text(), slow.text());
            EXPECT_EQ(fast.histogram, slow.histogram);
            EXPECT_EQ(fast.error_ratio, slow.error_ratio);
            EXPECT_EQ(fast.nrmse_allowed, slow.nrmse_allowed);
            EXPECT_EQ(fast.pass, slow.pass);
            ++cases;
          }
        }
  EXPECT_EQ(cases, 6 * 5 * 2 * 3 * 2);
}

}  // namespace
}  // namespace ssm::cmp

namespace ssm::cmp {
namespace {

void put(Tensor& t, int64_t i, float v) {
  if (t.dtype() == DType::f16) t.f16()[size_t(i)] = float_to_half_rne(v);
  else t.f32()[size_t(i)] = v;
}

// got's elements made wrong, drawn from rng: one in 10 far off (x1.5 + 1e-3), one in 10 by about an
// FP32 ULP; with ties, 4 in 10 set to the one value 0.5 + 1/64 first (the same error, the same
// score, on a reference of 0.5 everywhere).
void scatter_errors(const Tensor& ref, Tensor& got, std::mt19937_64& rng, bool ties = false) {
  for (int64_t i = 0; i < got.size(); ++i) {
    const uint64_t r = rng() % 10;
    if (ties && r < 4) put(got, i, 0.5f + 1.0f / 64);
    else if (r == 0) put(got, i, ref.get(i) * 1.5f + 1e-3f);
    else if (r == 1) put(got, i, ref.get(i) * (1.0f + 1e-6f));
  }
}

// Restores the default chunking and thread count whatever the test does.
struct ChunkingScope {
  int threads = omp_get_max_threads();
  ~ChunkingScope() {
    detail::set_scan_chunk(int64_t(1) << 15);
    omp_set_num_threads(threads);
  }
};

// The elementwise loop split into chunks on several threads gives the one pass's report, bit for
// bit: every class, both dtypes, with and without a condition, all-zero references, matched
// non-finite elements, and ties in the worst list (many elements with the same score, which the
// list must break by index across chunk borders). Chunk sizes 1, 7 and 64 on 4 threads against one
// pass (chunking off); each case reproduces from its printed seed alone.
TEST(CompareTensor, ChunkedScanGivesTheOnePassReport) {
  ChunkingScope restore;
  omp_set_num_threads(4);
  const Tolerances tols = Tolerances::defaults();
  int cases = 0, failing = 0;
  for (uint64_t seed = 1; seed <= 5; ++seed)
    for (TolClass cls : {TolClass::exact, TolClass::fp16_state, TolClass::fp32_state, TolClass::output,
                         TolClass::output_f16})
      for (bool f16 : {false, true})
        for (int variant = 0; variant < 4; ++variant) {  // 0 scattered errors, 1 ties, 2 zero ref, 3 inf/NaN
          SCOPED_TRACE(fmt::format("seed {} class {} f16 {} variant {}", seed, to_string(cls), f16, variant));
          const std::vector<int64_t> shape{3, 5, 37};
          Tensor ref = f16 ? random_f16(shape, seed) : random_f32(shape, seed);
          std::mt19937_64 rng(seed * 1000 + uint64_t(variant));
          if (variant == 1)
            for (int64_t i = 0; i < ref.size(); ++i) put(ref, i, 0.5f);
          if (variant == 2) ref = Tensor::zeros(ref.dtype(), ref.shape());
          Tensor got = ref;
          scatter_errors(ref, got, rng, /*ties=*/variant == 1);
          if (variant == 3) {
            const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
            for (int64_t i : {4, 100, 300}) {
              put(ref, i, inf);
              put(got, i, inf);
            }
            put(ref, 200, nan);
            put(got, 200, nan);
          }
          const Tensor cond = random_f32(shape, seed + 100, 0, 4);
          for (const Tensor* c : {static_cast<const Tensor*>(nullptr), &cond}) {
            Where w;
            w.tensor = "h";
            detail::set_scan_chunk(0);
            const TensorReport one = compare_tensor(ref, got, cls, tols, w, /*allow_zero_ref=*/true, c);
            failing += !one.pass;
            for (int64_t chunk : {1, 7, 64}) {
              SCOPED_TRACE(fmt::format("chunk {}", chunk));
              detail::set_scan_chunk(chunk);
              const TensorReport split = compare_tensor(ref, got, cls, tols, w, /*allow_zero_ref=*/true, c);
              EXPECT_EQ(split.json().dump(), one.json().dump());
              EXPECT_EQ(split.text(), one.text());
              uint64_t a, b;
              std::memcpy(&a, &split.nrmse, 8);
              std::memcpy(&b, &one.nrmse, 8);
              EXPECT_EQ(a, b);
              EXPECT_EQ(split.error_ratio, one.error_ratio);
              ++cases;
            }
          }
        }
  EXPECT_EQ(cases, 5 * 5 * 2 * 4 * 2 * 3);
  EXPECT_GT(failing, 100);  // the reports compared carry worst lists, histograms and failures
}

// A per-column condition [nv][vd] of an h-like field [nv][kd][vd] is read in place; the report is
// the one its field-sized copy (broadcast_condition) gives, bit for bit: one pass and chunks that
// start inside a row, with matched non-finite elements skipped and the identical-sides fast path.
TEST(CompareTensor, PerColumnConditionGivesTheBroadcastReport) {
  ChunkingScope restore;
  omp_set_num_threads(4);
  const Tolerances tols = Tolerances::defaults();
  int cases = 0, failing = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed)
    for (TolClass cls : {TolClass::fp32_state, TolClass::output, TolClass::output_f16})
      for (int variant = 0; variant < 3; ++variant) {  // 0 scattered errors, 1 non-finite matched, 2 identical
        SCOPED_TRACE(fmt::format("seed {} class {} variant {}", seed, to_string(cls), variant));
        const std::vector<int64_t> shape{3, 5, 37};
        Tensor ref = random_f32(shape, seed);
        Tensor got = ref;
        std::mt19937_64 rng(seed * 1000 + uint64_t(variant));
        if (variant == 0) scatter_errors(ref, got, rng);
        if (variant == 1)
          for (int64_t i : {4, 100, 300}) {
            put(ref, i, std::numeric_limits<float>::infinity());
            put(got, i, std::numeric_limits<float>::infinity());
            put(got, i + 1, ref.get(i + 1) * 1.01f);
          }
        const Tensor column = random_f32({3, 37}, seed + 100, 0, 4);
        const Tensor full = broadcast_condition(column, shape);
        ASSERT_EQ(full.shape(), shape);
        Where w;
        w.tensor = "h";
        for (int64_t chunk : {0, 1, 7, 64}) {
          SCOPED_TRACE(fmt::format("chunk {}", chunk));
          detail::set_scan_chunk(chunk);
          const TensorReport want = compare_tensor(ref, got, cls, tols, w, /*allow_zero_ref=*/true, &full);
          const TensorReport have = compare_tensor(ref, got, cls, tols, w, /*allow_zero_ref=*/true, &column);
          EXPECT_TRUE(have.conditioned);
          EXPECT_EQ(have.json().dump(), want.json().dump());
          EXPECT_EQ(have.text(), want.text());
          uint64_t a, b;
          std::memcpy(&a, &have.nrmse_allowed, 8);
          std::memcpy(&b, &want.nrmse_allowed, 8);
          EXPECT_EQ(a, b);
          failing += !want.pass;
          ++cases;
        }
      }
  EXPECT_EQ(cases, 4 * 3 * 3 * 4);
  EXPECT_GT(failing, 10);  // the reports compared carry worst lists and failures
  // a condition of neither shape is still refused, naming both
  const Tensor h = random_f32({3, 5, 37}, 1), wrong = random_f32({3, 5}, 2);
  const TensorReport bad = compare_tensor(h, h, TolClass::fp32_state, tols, where_h(), false, &wrong);
  EXPECT_FALSE(bad.pass);
  EXPECT_NE(bad.failure.find("condition tensor [3, 5] f32 does not match ref [3, 5, 37] f32"), std::string::npos)
      << bad.failure;
}

}  // namespace
}  // namespace ssm::cmp

namespace ssm::cmp {
namespace {

// Restores the lanes and the default chunking whatever the test does.
struct LanesScope {
  ChunkingScope chunking;
  ~LanesScope() { detail::set_scan_lanes(true); }
};

// A value drawn to reach every branch of the elementwise loop: magnitudes from FP16-subnormal to
// beyond FP16's range (fp16-state's scaled ULPs, half_ulp_at's subnormal spacing), +0 and -0,
// FP32 subnormals.
float edge_value(std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  switch (rng() % 8) {
    case 0: return rng() % 2 ? 0.0f : -0.0f;
    case 1: return float((u(rng) - 0.5) * 1e-40);          // FP32 subnormal
    case 2: return float((u(rng) - 0.5) * 1e-6);           // below FP16's normal range
    case 3: return float((u(rng) - 0.5) * 1.2e5);          // around and past FP16's largest
    default: return float((u(rng) - 0.5) * std::pow(10.0, -8 + 12 * u(rng)));
  }
}

// got from ref: equal, -0 for +0, a few ULPs off, a relative error from 1e-9 to 1, or another value.
float perturbed(float r, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(0, 1);
  switch (rng() % 6) {
    case 0: return r;
    case 1: return r == 0 ? -r : r;
    case 2: {
      float g = r;
      for (uint64_t k = rng() % 4; k > 0; --k) g = std::nextafter(g, rng() % 2 ? 1e30f : -1e30f);
      return g;
    }
    case 3: return float(r * (1 + (u(rng) - 0.5) * std::pow(10.0, -9 + 9 * u(rng))));
    case 4: return float(r + (u(rng) - 0.5) * std::pow(10.0, -9 + 8 * u(rng)));
    default: return edge_value(rng);
  }
}

// The elementwise loop four elements at a time (on a CPU with AVX2) gives the one-at-a-time
// report, bit for bit: every class, both dtypes, no condition, a per-element and a per-column
// condition, all-zero references, matched non-finite elements (which take the one-at-a-time loop),
// an unmatched one anywhere (the non-finite scan, 8 or 16 elements at a time, must find it),
// ties in the worst list, edge values (+-0, subnormals, FP16's range), default and zero tolerances
// (a zero bound), sizes that leave a tail of 1-3 elements and span several blocks of 256, one pass
// and chunks of 7 and 64 on 4 threads. Each case reproduces from its printed seed alone.
TEST(CompareTensor, LanesGiveTheOneAtATimeReport) {
  if (!detail::scan_lanes_available()) GTEST_SKIP() << "this CPU has no AVX2: the elementwise loop runs one at a time";
  LanesScope restore;
  omp_set_num_threads(4);
  const Tolerances defaults = Tolerances::defaults(), zero;
  int cases = 0, failing = 0, passing = 0;
  for (uint64_t seed = 1; seed <= 6; ++seed)
    for (TolClass cls : {TolClass::exact, TolClass::fp16_state, TolClass::fp32_state, TolClass::output,
                         TolClass::output_f16})
      for (bool f16 : {false, true})
        // 0 edge values, 1 small errors, 2 ties, 3 zero ref, 4 matched inf, 5 one NaN or inf in got alone
        for (int variant = 0; variant < 6; ++variant) {
          SCOPED_TRACE(fmt::format("seed {} class {} f16 {} variant {}", seed, to_string(cls), f16, variant));
          std::mt19937_64 rng(seed * 7919 + uint64_t(variant) * 31 + uint64_t(cls) * 3 + f16);
          const std::vector<int64_t> shape{int64_t(2 + rng() % 3), int64_t(5 + rng() % 40), int64_t(3 + rng() % 37)};
          Tensor ref = Tensor::zeros(f16 ? DType::f16 : DType::f32, shape), got = ref;
          for (int64_t i = 0; i < ref.size(); ++i) {
            const float r = variant == 0 ? edge_value(rng) : variant == 2 ? 0.5f : variant == 3 ? 0.0f
                                                                 : float(std::uniform_real_distribution<double>(-1, 1)(rng));
            const float g = variant == 1 ? r * (1 + 1e-7f * float(int(rng() % 5) - 2))
                            : variant == 2 ? (rng() % 3 ? 0.5f + 1.0f / 64 : 0.5f)
                            : variant == 3 ? (rng() % 50 ? 0.0f : edge_value(rng))
                                           : perturbed(r, rng);
            put(ref, i, r);
            put(got, i, g);
          }
          if (variant == 4)
            for (int64_t i : {int64_t(3), ref.size() / 2, ref.size() - 1}) {
              put(ref, i, std::numeric_limits<float>::infinity());
              put(got, i, std::numeric_limits<float>::infinity());
            }
          if (variant == 5)  // anywhere, or the last element (past the last full vector of 8 or 16)
            put(got, seed % 2 ? int64_t(rng() % uint64_t(ref.size())) : ref.size() - 1,
                rng() % 2 ? std::numeric_limits<float>::quiet_NaN() : -std::numeric_limits<float>::infinity());
          const Tensor element_cond = random_f32(shape, seed + 100, 0, 4);
          const Tensor column_cond = random_f32({shape[0], shape[2]}, seed + 200, 0, 4);
          for (const Tensor* c : {static_cast<const Tensor*>(nullptr), &element_cond, &column_cond})
            for (const Tolerances* tols : {&defaults, &zero}) {
              Where w;
              w.tensor = "h";
              detail::set_scan_chunk(0);
              detail::set_scan_lanes(false);
              const TensorReport one = compare_tensor(ref, got, cls, *tols, w, /*allow_zero_ref=*/true, c);
              (one.pass ? passing : failing) += 1;
              detail::set_scan_lanes(true);
              for (int64_t chunk : {int64_t(0), int64_t(7), int64_t(64)}) {
                SCOPED_TRACE(fmt::format("chunk {} condition {}", chunk, c ? c->shape_string() : "none"));
                detail::set_scan_chunk(chunk);
                const TensorReport four = compare_tensor(ref, got, cls, *tols, w, /*allow_zero_ref=*/true, c);
                EXPECT_EQ(four.json().dump(), one.json().dump());
                EXPECT_EQ(four.text(), one.text());
                EXPECT_EQ(four.histogram, one.histogram);
                EXPECT_EQ(four.error_ratio, one.error_ratio);
                uint64_t a, b;  // the sums' bits (the FP16 sums read F16C-widened halves)
                std::memcpy(&a, &four.nrmse, 8);
                std::memcpy(&b, &one.nrmse, 8);
                EXPECT_EQ(a, b);
                ++cases;
              }
            }
        }
  EXPECT_EQ(cases, 6 * 5 * 2 * 6 * 3 * 2 * 3);
  EXPECT_GT(failing, 200);  // the reports compared carry worst lists, histograms and failures
  EXPECT_GT(passing, 100);
}

}  // namespace
}  // namespace ssm::cmp
