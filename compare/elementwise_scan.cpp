// The elementwise work of one tensor comparison (compare/elementwise_scan.h).
#include "compare/elementwise_scan.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iterator>
#include <limits>

#include "core/half_widen.h"

namespace ssm::cmp::scan {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

constexpr bool ulp_bins(TolClass c) { return c == TolClass::exact || c == TolClass::fp16_state; }

// The histogram's bin edges (bin_labels' bins): ULPs for ulp_bins classes, closing on the right,
// (e0, e1]; absolute errors for the others, past 0 and then at or past each decade, [1e-9, 1e-8)
// being bin 2. Used by bin_of and by the lanes' edge counts.
constexpr double kUlpEdges[] = {0, 1, 2, 4, 8, 16, 64, 256, 4096};
constexpr double kDecadeEdges[] = {1e-9, 1e-8, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1};

// The bin is the number of bin edges the value passes, counted without branches (this runs once
// per element, on values that jump between bins).
size_t bin_of(TolClass c, double abs_err, double ulp) {
  size_t b = 0;
  if (ulp_bins(c)) {
    for (double e : kUlpEdges) b += ulp > e;
    return b;
  }
  b = abs_err > 0;
  for (double e : kDecadeEdges) b += abs_err >= e;
  return b;
}

// Element access by storage, so that the elementwise loop below is compiled once per dtype
// instead of deciding the dtype at every element (the values and bits are Tensor::get's and
// compare_tensor.cpp's bits_of's).
struct F32Elems {
  const float* p;
  float value(int64_t i) const { return p[i]; }
  uint32_t bits(int64_t i) const {
    uint32_t x;
    std::memcpy(&x, p + i, 4);
    return x;
  }
  int64_t ulp(const F32Elems& o, int64_t i) const { return ulp_distance_f32(p[i], o.p[i]); }
  bool non_finite(int64_t i) const { return (bits(i) & 0x7f800000u) == 0x7f800000u; }
};
struct F16Elems {
  const uint16_t* p;
  float value(int64_t i) const { return half_to_float(p[i]); }
  uint32_t bits(int64_t i) const { return p[i]; }
  int64_t ulp(const F16Elems& o, int64_t i) const { return ulp_distance_f16(p[i], o.p[i]); }
  bool non_finite(int64_t i) const { return !half_is_finite(p[i]); }
};

// f(ref elements, got elements) with the accessors of their dtype (compare_tensor has checked
// that both sides have the same one).
template <class F>
auto with_elems(const Tensor& ref, const Tensor& got, F&& f) {
  return ref.dtype() == DType::f16 ? f(F16Elems{ref.f16()}, F16Elems{got.f16()})
                                   : f(F32Elems{ref.f32()}, F32Elems{got.f32()});
}

// Whether any element is inf or NaN (one pass without branches).
template <class Elems>
bool any_non_finite(const Elems t, int64_t n) {
  bool any = false;
  for (int64_t i = 0; i < n; ++i) any |= t.non_finite(i);
  return any;
}

// One element's entry in a worst list kept sorted under (score desc, index asc) and at most
// kWorstElements long. Fed in index order, the list is the top kWorstElements of that order.
// The test runs for every element of the loop, inline; the insertion, for the few that enter, is a
// call (a call in the loop makes it keep its running maxima and sums in memory).
__attribute__((noinline)) void insert_worst(std::vector<std::pair<double, int64_t>>& worst, double score, int64_t i) {
  worst.emplace_back(score, i);
  std::sort(worst.begin(), worst.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  if (worst.size() > size_t(kWorstElements)) worst.pop_back();
}
inline void keep_worst(std::vector<std::pair<double, int64_t>>& worst, double score, int64_t i) {
  if (score > 0 && (worst.size() < size_t(kWorstElements) || score > worst.back().first)) insert_worst(worst, score, i);
}

void merge_part(ScanPart& acc, const ScanPart& p) {
  acc.max.merge(p.max);
  acc.mismatched += p.mismatched;
  for (size_t b = 0; b < acc.histogram.size(); ++b) acc.histogram[b] += p.histogram[b];
  for (const auto& [score, i] : p.worst) keep_worst(acc.worst, score, i);
}

// The per-element terms of the loop's two sums: d = got - ref and |cond| (0 without one), in double.
template <class Elems>
double diff_at(const Elems ref, const Elems got, int64_t i) {
  return double(got.value(i)) - double(ref.value(i));
}

// Walks a CondView in index order from element `begin`: value() is |cond| of the current
// element in double (0 without a condition), next() moves to the following element.
class CondCursor {
 public:
  CondCursor(const CondView& c, int64_t begin) : vd_(c.vd), head_(c.head) {
    if (!c.p) return;
    row_ = c.p + (begin / head_) * vd_;
    col_ = begin % vd_;
    in_head_ = begin % head_ - col_;
  }
  double value() const { return row_ ? std::fabs(double(row_[col_])) : 0.0; }
  bool present() const { return row_ != nullptr; }
  void next() {
    if (!row_ || ++col_ < vd_) return;
    col_ = 0;
    in_head_ += vd_;
    if (in_head_ == head_) {
      in_head_ = 0;
      row_ += vd_;
    }
  }
  // value() of the next n elements into out, moving past them: a row's run at a time (a loop the
  // compiler vectorises), instead of value() and next() per element; a condition is present.
  void fill(double* out, int64_t n) {
    while (n > 0) {
      const int64_t run = std::min(vd_ - col_, n);
      for (int64_t j = 0; j < run; ++j) out[j] = std::fabs(double(row_[col_ + j]));
      out += run;
      n -= run;
      col_ += run;
      if (col_ < vd_) break;
      col_ = 0;
      in_head_ += vd_;
      if (in_head_ == head_) {
        in_head_ = 0;
        row_ += vd_;
      }
    }
  }

 private:
  const float* row_ = nullptr;
  int64_t col_ = 0, in_head_ = 0, vd_ = 0, head_ = 0;
};

// The elementwise limits (see compare_tensor) over the elements [begin, end) not in `matched`,
// in index order.
template <class Elems>
ScanPart scan_range(const Elems ref, const Elems got, int64_t begin, int64_t end, const std::vector<bool>& matched,
                    const ScanSetup& u) {
  // in locals, which the compiler keeps in registers (in the report they were stored at every
  // element), handed to the part after the loop
  Maxima mx;
  int64_t mismatched = 0;
  std::array<int64_t, 12> histogram{};
  std::vector<std::pair<double, int64_t>> worst;
  const TolClass cls = u.cls;
  const Tolerance& t = u.t;
  CondCursor cond(u.cond, begin);
  const bool conditioned = cond.present();
  const double ref_rms = u.ref_rms;
  const bool ref_zero = u.ref_zero;
  const bool scaled = cls == TolClass::fp16_state;
  const double ucond = t.cond * kUnitRoundoffF32;
  for (int64_t i = begin; i < end; ++i, cond.next()) {
    if (!matched.empty() && matched[size_t(i)]) continue;
    const double rv = ref.value(i), gv = got.value(i);
    const double d = diff_at(ref, got, i), ad = std::fabs(d), ar = std::fabs(rv);
    const double ulp = double(ref.ulp(got, i));
    const double rel = ad == 0 ? 0 : (ar == 0 ? kInf : ad / ar);
    // fp16-state counts FP16 ULPs at scale on the values, so FP32 tensors that descend from
    // FP16-stored state (a widened prefill, the f16-pool stage) are measured the same way
    const double sulp = scaled ? ad / half_ulp_at(std::max(ar, ref_rms)) : 0.0;
    mx.ulp_scaled = std::max(mx.ulp_scaled, sulp);
    const bool bits_differ = ref.bits(i) != got.bits(i);
    mx.abs = std::max(mx.abs, ad);
    mx.rel = std::max(mx.rel, rel);
    mx.ulp = std::max(mx.ulp, ulp);
    ++histogram[bin_of(cls, ad, cls == TolClass::fp16_state ? sulp : ulp)];

    // fp32-state: rtol applies at max(|ref|, rms(ref)). FP32 rounding of a head's large
    // elements reaches its small ones through H^T k, so a per-element rtol would judge small
    // elements by a scale they do not have (docs/tolerances.md); nrmse stays the global guard.
    const double rscale = cls == TolClass::fp32_state ? std::max(ar, ref_rms) : ar;
    // the element's condition: the error FP32 arithmetic cannot avoid on it (Tolerance::cond)
    const double ci = cond.value();
    if (conditioned) mx.cond_ratio = std::max(mx.cond_ratio, ad == 0 ? 0.0 : ci > 0 ? ad / (kUnitRoundoffF32 * ci) : kInf);
    const double cslack = ucond * ci;
    const double bound = t.atol + t.rtol * rscale + cslack;
    bool bad = false;
    double score = 0;
    switch (cls) {
      case TolClass::exact:
        bad = bits_differ;
        score = bits_differ ? std::max(ad, 1e-300) : 0;  // -0 vs +0 still ranks
        break;
      case TolClass::fp16_state:
        bad = sulp > t.max_ulp && ad > bound;
        score = sulp;
        if (ad > bound) mx.need_ulp = std::max(mx.need_ulp, sulp);
        break;
      case TolClass::fp32_state:
      case TolClass::output:
      case TolClass::output_f16:
        bad = ad > bound;
        score = bound > 0 ? ad / bound : ad;
        mx.need_atol = std::max(mx.need_atol, ad - t.rtol * rscale - cslack);
        if (ad > t.atol + cslack) mx.need_rtol = std::max(mx.need_rtol, rscale > 0 ? (ad - t.atol - cslack) / rscale : kInf);
        break;
    }
    // An all-zero reference (allowed) is only matched by zeros: an untouched field stays zero. A
    // certified zero output (compare_outputs) is matched within its condition term, which is 0
    // where its terms are exactly zero and a few subnormals' worth where FP32 underflows
    // (reference/underflow.h); state fields stay at exact zeros.
    if (ref_zero) {
      const bool output = cls == TolClass::output || cls == TolClass::output_f16;
      bad = cls == TolClass::exact ? bits_differ : output ? ad > cslack : gv != 0.0;
    }
    if (bad) ++mismatched;
    mx.error_ratio = std::max(mx.error_ratio, ref_zero || cls == TolClass::exact ? (bad ? kInf : 0.0)
                                            : cls == TolClass::fp16_state
                                                ? std::min(over(sulp, t.max_ulp), over(ad, bound))
                                                : over(ad, bound));
    keep_worst(worst, score, i);
  }
  return ScanPart{mx, mismatched, histogram, std::move(worst)};
}

// The elementwise loop four elements at a time (GCC vector extensions, compiled for AVX2: see
// scan_lanes). Every lane computes scan_range's values by the same IEEE operations in the same
// order, so the part is the same bit for bit (CompareTensor.LanesGiveTheOneAtATimeReport, against
// scan_range): maxima are order-free (`v > m ? v : m` is std::max(m, v) lane by lane, NaN ignored
// the same way; every maximum starts at +0 and no value is -0 where a tie could pick a sign),
// counts add, an element's histogram bin is the number of bin edges it passes (bin_of's, the
// edges being ordered), and the worst list is fed in
// index order, a block at a time, only when the block's best score could enter it. Used on
// ranges without matched (non-finite) elements; the last n % 4 elements go through scan_range.
namespace lanes {
using VD = double __attribute__((vector_size(32)));
using VL = int64_t __attribute__((vector_size(32)));
using VF = float __attribute__((vector_size(16)));
using VI = int32_t __attribute__((vector_size(16)));
using VH = uint16_t __attribute__((vector_size(8)));
constexpr int64_t kLanes = 4;
constexpr int64_t kBlock = 256;  // elements whose scores are kept for the worst list at a time

// Everything here is inlined into scan_lanes (internal linkage), so no vector crosses a call and
// the ABI of 32-byte vectors without AVX, which GCC warns about (at the end of the file), never
// applies.
#pragma GCC diagnostic ignored "-Wpsabi"
#define SSM_LANES_INLINE inline __attribute__((always_inline))
SSM_LANES_INLINE VD splat(double x) { return VD{x, x, x, x}; }
SSM_LANES_INLINE VD vmax(VD m, VD v) { return v > m ? v : m; }  // std::max(m, v)
SSM_LANES_INLINE VD vmin(VD a, VD b) { return b < a ? b : a; }  // std::min(a, b)
SSM_LANES_INLINE VD vabs(VD x) {
  constexpr int64_t kMag = std::numeric_limits<int64_t>::max();
  return (VD)((VL)x & VL{kMag, kMag, kMag, kMag});
}
SSM_LANES_INLINE VD over(VD v, VD lim) {  // over(), lane by lane
  return lim > 0 ? v / lim : (v > 0 ? splat(kInf) : splat(0.0));
}
// half_ulp_at for finite x >= 0 (every value it gets here: max(|ref|, rms(ref)) of finite values)
SSM_LANES_INLINE VD half_ulp(VD x) {
  const VL out = (((VL)x >> 52) - 10) << 52;
  return x >= 6.103515625e-05 ? (VD)out : splat(5.9604644775390625e-08);
}
// The ordered-integer value of a float's or a half's bits (ulp_distance_f32's and _f16's ord), as
// doubles: the distance of two is their difference, exact in double.
SSM_LANES_INLINE VD ord(VI bits) {
  const VI s = bits >> 31, m = bits & 0x7fffffff;
  return __builtin_convertvector((m ^ s) - s, VD);
}
SSM_LANES_INLINE VD ord(VH h) {
  const VI bits = __builtin_convertvector(h, VI);
  const VI s = -(bits >> 15), m = bits & 0x7fff;
  return __builtin_convertvector((m ^ s) - s, VD);
}

// Four elements' values (as double), ULP distance and whether their bits differ.
struct Four {
  VD r, g, ulp;
  VL differ;
};
SSM_LANES_INLINE Four load4(const F32Elems ref, const F32Elems got, const float*, const float*, int64_t i, int64_t) {
  VF r, g;
  VI rb, gb;
  std::memcpy(&r, ref.p + i, sizeof r);
  std::memcpy(&g, got.p + i, sizeof g);
  std::memcpy(&rb, ref.p + i, sizeof rb);
  std::memcpy(&gb, got.p + i, sizeof gb);
  return {__builtin_convertvector(r, VD), __builtin_convertvector(g, VD), vabs(ord(rb) - ord(gb)),
          __builtin_convertvector(rb != gb, VL)};
}
// F16: the values from the block's widened copies rf, gf (at k), the bits from the halves
SSM_LANES_INLINE Four load4(const F16Elems ref, const F16Elems got, const float* rf, const float* gf, int64_t i,
                            int64_t k) {
  VF r, g;
  VH rb, gb;
  std::memcpy(&r, rf + k, sizeof r);
  std::memcpy(&g, gf + k, sizeof g);
  std::memcpy(&rb, ref.p + i, sizeof rb);
  std::memcpy(&gb, got.p + i, sizeof gb);
  return {__builtin_convertvector(r, VD), __builtin_convertvector(g, VD), vabs(ord(rb) - ord(gb)),
          __builtin_convertvector(rb != gb, VL)};
}
// widens a block of halves (F16Elems) for load4; nothing to do for floats
SSM_LANES_INLINE void widen(const F32Elems, int64_t, int64_t, float*) {}
// (core/half_widen.h: F16C, exact as half_to_float is)
SSM_LANES_INLINE void widen(const F16Elems e, int64_t i, int64_t n, float* out) { widen_halves(e.p + i, out, n); }

// bin edges counted: kUlpEdges, or (> 0) and kDecadeEdges
constexpr int kEdges = int(std::size(kDecadeEdges)) + 1;
static_assert(std::size(kUlpEdges) <= size_t(kEdges));
static_assert(std::tuple_size<decltype(ScanPart::histogram)>::value == size_t(kEdges) + 1);
template <TolClass C>
constexpr int edges_of() { return ulp_bins(C) ? int(std::size(kUlpEdges)) : kEdges; }
struct Acc {
  VD abs{}, rel{}, ulp{}, ulp_scaled{}, cond_ratio{}, error_ratio{}, need_atol{}, need_rtol{}, need_ulp{};
  VL bad{};
  // each lane's histogram: a lane's bin is the number of edges its value passes (bin_of), summed
  // from the edge masks in one register; counting them per edge kept eleven more vectors live
  // than a CPU with AVX2 has registers, and the loop spent most of its time storing them
  int64_t histogram[kLanes][kEdges + 1]{};
};
// counts each lane's element in its bin
SSM_LANES_INLINE void count(Acc& a, VL bin) {
  ++a.histogram[0][bin[0]];
  ++a.histogram[1][bin[1]];
  ++a.histogram[2][bin[2]];
  ++a.histogram[3][bin[3]];
}

// scan_range's loop body for four elements of class C (Cond: a condition is read); returns their
// scores.
template <TolClass C, bool Cond>
SSM_LANES_INLINE VD element4(Acc& a, const Four& e, VD ci, const ScanSetup& u) {
  constexpr bool scaled = C == TolClass::fp16_state;
  const Tolerance& t = u.t;
  const VD rms = splat(u.ref_rms);
  const VD d = e.g - e.r, ad = vabs(d), ar = vabs(e.r);
  const VD rel = ad == 0 ? splat(0.0) : ad / ar;
  VD sulp = splat(0.0);
  if constexpr (scaled) sulp = ad / half_ulp(vmax(ar, rms));
  a.ulp_scaled = vmax(a.ulp_scaled, sulp);
  a.abs = vmax(a.abs, ad);
  a.rel = vmax(a.rel, rel);
  a.ulp = vmax(a.ulp, e.ulp);
  VL bin{};  // minus the number of edges passed (masks are -1)
  if constexpr (ulp_bins(C)) {
    const VD hv = scaled ? sulp : e.ulp;
    for (int k = 0; k < edges_of<C>(); ++k) bin += hv > kUlpEdges[k];
  } else {
    bin += ad > 0;
    for (int k = 0; k + 1 < edges_of<C>(); ++k) bin += ad >= kDecadeEdges[k];
  }
  count(a, -bin);
  const VD rscale = C == TolClass::fp32_state ? vmax(ar, rms) : ar;
  if constexpr (Cond)
    a.cond_ratio = vmax(a.cond_ratio, ad == 0 ? splat(0.0) : (ci > 0 ? ad / (kUnitRoundoffF32 * ci) : splat(kInf)));
  const VD cslack = (t.cond * kUnitRoundoffF32) * ci;
  const VD bound = t.atol + t.rtol * rscale + cslack;
  VL bad;
  VD score;
  if constexpr (C == TolClass::exact) {
    bad = e.differ;
    score = e.differ ? vmax(ad, splat(1e-300)) : splat(0.0);
  } else if constexpr (scaled) {
    bad = (sulp > t.max_ulp) & (ad > bound);
    score = sulp;
    a.need_ulp = vmax(a.need_ulp, ad > bound ? sulp : splat(0.0));
  } else {
    bad = ad > bound;
    score = bound > 0 ? ad / bound : ad;
    a.need_atol = vmax(a.need_atol, ad - t.rtol * rscale - cslack);
    a.need_rtol = vmax(a.need_rtol, ad > t.atol + cslack ? (rscale > 0 ? (ad - t.atol - cslack) / rscale : splat(kInf))
                                                         : splat(0.0));
  }
  if (u.ref_zero) {  // as in the scalar scan above
    if constexpr (C == TolClass::output || C == TolClass::output_f16) bad = ad > cslack;
    else bad = C == TolClass::exact ? e.differ : e.g != 0;
  }
  a.bad += bad;
  VD err;
  if (u.ref_zero || C == TolClass::exact)
    err = bad ? splat(kInf) : splat(0.0);
  else if constexpr (scaled)
    err = vmin(over(sulp, splat(t.max_ulp)), over(ad, bound));
  else
    err = over(ad, bound);
  a.error_ratio = vmax(a.error_ratio, err);
  return score;
}

SSM_LANES_INLINE double lane_max(VD v) { return std::max(std::max(std::max(std::max(0.0, v[0]), v[1]), v[2]), v[3]); }
SSM_LANES_INLINE int64_t lane_sum(VL v) { return v[0] + v[1] + v[2] + v[3]; }

// scan_range over [begin, end) (no matched element), four at a time. Compiled for AVX2 (one
// instruction per lane operation; on the baseline ISA the 32-byte vectors take several and the
// loop measured twice as slow as scan_range), and only called where the CPU has it (scan_part).
// AVX2 without FMA: no multiply and add is contracted, every lane rounds as scan_range does.
template <TolClass C, bool Cond, class Elems>
__attribute__((target("avx2,f16c"))) ScanPart scan_lanes(const Elems ref, const Elems got, int64_t begin, int64_t end, const ScanSetup& u) {
  Acc a;
  std::vector<std::pair<double, int64_t>> worst;
  CondCursor cond(u.cond, begin);
  alignas(32) float rf[kBlock], gf[kBlock];
  alignas(32) double ci[kBlock], score[kBlock];
  const int64_t n4 = begin + (end - begin) / kLanes * kLanes;
  for (int64_t b0 = begin; b0 < n4; b0 += kBlock) {
    const int64_t len = std::min(kBlock, n4 - b0);
    widen(ref, b0, len, rf);
    widen(got, b0, len, gf);
    if constexpr (Cond) cond.fill(ci, len);
    VD best{};
    for (int64_t k = 0; k < len; k += kLanes) {
      VD c4{};
      if constexpr (Cond) std::memcpy(&c4, ci + k, sizeof c4);
      const VD s = element4<C, Cond>(a, load4(ref, got, rf, gf, b0 + k, k), c4, u);
      std::memcpy(score + k, &s, sizeof s);
      best = vmax(best, s);
    }
    const double top = lane_max(best);
    if (top > 0 && (worst.size() < size_t(kWorstElements) || top > worst.back().first))
      for (int64_t k = 0; k < len; ++k) keep_worst(worst, score[k], b0 + k);
  }
  ScanPart p;
  p.max.abs = lane_max(a.abs);
  p.max.rel = lane_max(a.rel);
  p.max.ulp = lane_max(a.ulp);
  p.max.ulp_scaled = lane_max(a.ulp_scaled);
  p.max.cond_ratio = lane_max(a.cond_ratio);
  p.max.error_ratio = lane_max(a.error_ratio);
  p.max.need_atol = lane_max(a.need_atol);
  p.max.need_rtol = lane_max(a.need_rtol);
  p.max.need_ulp = lane_max(a.need_ulp);
  p.mismatched = -lane_sum(a.bad);
  for (int j = 0; j < kLanes; ++j)
    for (int b = 0; b <= kEdges; ++b) p.histogram[size_t(b)] += a.histogram[j][b];
  p.worst = std::move(worst);
  if (n4 < end) {
    std::vector<bool> none;
    merge_part(p, scan_range(ref, got, n4, end, none, u));
  }
  return p;
}
#undef SSM_LANES_INLINE
}  // namespace lanes

// The elementwise loop over [begin, end): four lanes at a time when the CPU has AVX2 and no
// element is matched (the same part, bit for bit), else scan_range.
// (a static initialiser: __builtin_cpu_init first, libgcc's own may not have run yet)
const bool kCpuHasAvx2 = [] {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c");
}();
bool g_scan_lanes = kCpuHasAvx2;  // detail::set_scan_lanes (tests)
template <class Elems>
ScanPart scan_part(const Elems ref, const Elems got, int64_t begin, int64_t end, const std::vector<bool>& matched,
                   const ScanSetup& u) {
  const bool cond = u.cond.p != nullptr;
  if (!g_scan_lanes || !matched.empty()) return scan_range(ref, got, begin, end, matched, u);
  switch (u.cls) {
    case TolClass::exact:
      if (!cond) return lanes::scan_lanes<TolClass::exact, false>(ref, got, begin, end, u);
      break;
    case TolClass::fp16_state:
      if (!cond) return lanes::scan_lanes<TolClass::fp16_state, false>(ref, got, begin, end, u);
      break;
    case TolClass::fp32_state:
      return cond ? lanes::scan_lanes<TolClass::fp32_state, true>(ref, got, begin, end, u)
                  : lanes::scan_lanes<TolClass::fp32_state, false>(ref, got, begin, end, u);
    case TolClass::output:
    case TolClass::output_f16:  // the same limits as output in the loop
      return cond ? lanes::scan_lanes<TolClass::output, true>(ref, got, begin, end, u)
                  : lanes::scan_lanes<TolClass::output, false>(ref, got, begin, end, u);
  }
  return scan_range(ref, got, begin, end, matched, u);  // exact and fp16-state never get a condition
}

// any_non_finite with AVX2: the exponent fields of 8 floats or 16 halves at a time, OR-ed (the
// same answer: an element is non-finite exactly when its exponent field is all ones).
template <class V, class Bits>
__attribute__((target("avx2"))) bool any_non_finite_lanes(const Bits* p, int64_t n, Bits exponent) {
  constexpr int64_t kCount = sizeof(V) / sizeof(Bits);
  V any{};
  int64_t i = 0;
  for (; i + kCount <= n; i += kCount) {
    V v;
    std::memcpy(&v, p + i, sizeof v);
    any |= (V)((v & exponent) == exponent);
  }
  bool found = false;
  for (; i < n; ++i) found |= (p[i] & exponent) == exponent;
  for (int64_t k = 0; k < kCount; ++k) found |= any[k] != 0;
  return found;
}
using V8u32 = uint32_t __attribute__((vector_size(32)));
using V16u16 = uint16_t __attribute__((vector_size(32)));
bool any_non_finite_of(const F32Elems t, int64_t n) {
  if (!g_scan_lanes) return any_non_finite(t, n);
  return any_non_finite_lanes<V8u32>(reinterpret_cast<const uint32_t*>(t.p), n, 0x7f800000u);
}
bool any_non_finite_of(const F16Elems t, int64_t n) {
  if (!g_scan_lanes) return any_non_finite(t, n);
  return any_non_finite_lanes<V16u16>(t.p, n, uint16_t(0x7c00));
}

template <class Elems>
Squares squares(const Elems ref, const Elems got, int64_t n, const std::vector<bool>& matched, const CondView& c) {
  Squares s;
  CondCursor cond(c, 0);
  for (int64_t i = 0; i < n; ++i, cond.next()) {
    if (!matched.empty() && matched[size_t(i)]) continue;
    s.add(ref.value(i), diff_at(ref, got, i), cond.value());
  }
  return s;
}

// squares of FP16 sides on an AVX2+F16C CPU: the halves widened a block at a time (F16C: exact,
// as half_to_float is), then the same three sums in the same order (AVX2 without FMA: the same
// roundings), so the same bits; the per-element half_to_float was most of the pass.
__attribute__((target("avx2,f16c"))) Squares squares_widened(const F16Elems ref, const F16Elems got, int64_t n,
                                                             const std::vector<bool>& matched, const CondView& c) {
  Squares s;
  CondCursor cond(c, 0);
  alignas(32) float rf[lanes::kBlock], gf[lanes::kBlock];
  for (int64_t b0 = 0; b0 < n; b0 += lanes::kBlock) {
    const int64_t len = std::min(lanes::kBlock, n - b0);
    lanes::widen(ref, b0, len, rf);
    lanes::widen(got, b0, len, gf);
    for (int64_t k = 0; k < len; ++k, cond.next()) {
      if (!matched.empty() && matched[size_t(b0 + k)]) continue;
      s.add(rf[k], double(gf[k]) - double(rf[k]), cond.value());
    }
  }
  return s;
}
Squares squares_of(const F32Elems ref, const F32Elems got, int64_t n, const std::vector<bool>& matched,
                   const CondView& c) {
  return squares(ref, got, n, matched, c);
}
Squares squares_of(const F16Elems ref, const F16Elems got, int64_t n, const std::vector<bool>& matched,
                   const CondView& c) {
  return g_scan_lanes ? squares_widened(ref, got, n, matched, c) : squares(ref, got, n, matched, c);
}

// The threads that run_tasks can use: the current team's inside a parallel region (compare_state's
// fields), else a new region's.
int task_threads() { return omp_in_parallel() ? omp_get_num_threads() : omp_get_max_threads(); }

// Runs f(0) .. f(n - 1) as OpenMP tasks: inside a parallel region the team's idle threads take
// them; outside one, a region of its own runs them.
template <class F>
void run_tasks(int64_t n, const F& f) {
  if (omp_in_parallel()) {
#pragma omp taskloop grainsize(1)
    for (int64_t c = 0; c < n; ++c) f(c);
  } else {
#pragma omp parallel
#pragma omp single
#pragma omp taskloop grainsize(1)
    for (int64_t c = 0; c < n; ++c) f(c);
  }
}

// The whole elementwise loop over n elements: one pass for small tensors; for large ones, chunks
// of g_scan_chunk elements (32768) on several threads, merged in chunk order. Either way the part
// is the one a single pass in index order gives, bit for bit.
int64_t g_scan_chunk = int64_t(1) << 15;  // detail::set_scan_chunk (tests)
template <class Elems>
ScanPart chunked_scan(const Elems ref, const Elems got, int64_t n, const std::vector<bool>& matched,
                       const ScanSetup& u) {
  const int64_t chunk = g_scan_chunk;
  const int64_t chunks = chunk > 0 ? (n + chunk - 1) / chunk : 1;
  if (chunks < 2 || task_threads() < 2) return scan_part(ref, got, 0, n, matched, u);
  std::vector<ScanPart> parts(static_cast<size_t>(chunks));
  run_tasks(chunks, [&](int64_t c) { parts[size_t(c)] = scan_part(ref, got, c * chunk, std::min(n, (c + 1) * chunk), matched, u); });
  ScanPart all = std::move(parts[0]);
  for (size_t c = 1; c < parts.size(); ++c) merge_part(all, parts[c]);
  return all;
}

}  // namespace

std::vector<std::string> bin_labels(TolClass c) {
  if (ulp_bins(c)) return {"0", "<=1", "<=2", "<=4", "<=8", "<=16", "<=64", "<=256", "<=4096", ">4096"};
  return {"0", "<1e-9", "[1e-9,1e-8)", "[1e-8,1e-7)", "[1e-7,1e-6)", "[1e-6,1e-5)", "[1e-5,1e-4)",
          "[1e-4,1e-3)", "[1e-3,1e-2)", "[1e-2,1e-1)", "[1e-1,1)", ">=1"};
}

double over(double value, double limit) {
  if (limit > 0) return value / limit;
  return value > 0 ? kInf : 0.0;
}

CondView cond_view(const Tensor* cond, const Tensor& field) {
  if (!cond) return {};
  constexpr int64_t kNever = std::numeric_limits<int64_t>::max();  // element by element: never wraps
  if (cond->shape() == field.shape()) return {cond->f32(), kNever, kNever};
  const auto& f = field.shape();
  return {cond->f32(), f[2], f[1] * f[2]};
}
bool column_condition(const std::vector<int64_t>& cond, const std::vector<int64_t>& field) {
  return cond.size() == 2 && field.size() == 3 && cond[0] == field[0] && cond[1] == field[2];
}

bool any_non_finite_in(const Tensor& ref, const Tensor& got) {
  const int64_t n = ref.size();
  return with_elems(ref, got, [n](auto a, auto b) { return any_non_finite_of(a, n) || any_non_finite_of(b, n); });
}

Squares sums(const Tensor& ref, const Tensor& got, const std::vector<bool>& matched, const CondView& c) {
  return with_elems(ref, got, [&](auto a, auto b) { return squares_of(a, b, ref.size(), matched, c); });
}

ScanPart elementwise(const Tensor& ref, const Tensor& got, const std::vector<bool>& matched, const ScanSetup& u) {
  return with_elems(ref, got, [&](auto a, auto b) { return chunked_scan(a, b, ref.size(), matched, u); });
}

}  // namespace ssm::cmp::scan

namespace ssm::cmp {
void detail::set_scan_chunk(int64_t elements) { scan::g_scan_chunk = elements; }
void detail::set_scan_lanes(bool on) { scan::g_scan_lanes = on && scan::kCpuHasAvx2; }
bool detail::scan_lanes_available() { return scan::kCpuHasAvx2; }
}  // namespace ssm::cmp
