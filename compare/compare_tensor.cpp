// Metrics of one tensor comparison under a tolerance class (see compare.h): non-finite and
// vacuity checks first, then elementwise limits, normalised RMS error, worst elements,
// histogram and the smallest passing tolerance. Text/JSON forms: compare/report.cpp.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <fmt/core.h>
#include <limits>
#include <utility>

#include "compare/compare.h"
#include "compare/elementwise_scan.h"

namespace ssm::cmp {

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
bool g_identical_fast_path = true;  // detail::set_identical_fast_path (tests)

std::vector<int64_t> unravel(const std::vector<int64_t>& shape, int64_t i) {
  std::vector<int64_t> idx(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    const int64_t n = shape[d] > 0 ? shape[d] : 1;
    idx[d] = i % n;
    i /= n;
  }
  return idx;
}

uint32_t bits_of(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::f16) return t.f16()[size_t(i)];
  uint32_t x;
  std::memcpy(&x, t.f32() + i, 4);
  return x;
}

// Both sides hold the same non-finite value: the same infinity (bits), or NaN and NaN. The
// contract makes such values legitimate (the FP32->FP16 converter overflows to inf; a step on
// inf state gives NaN), so identical ones are matched, never measured.
bool same_non_finite(const Tensor& a, const Tensor& b, int64_t i) {
  const double x = a.get(i), y = b.get(i);
  if (std::isnan(x) && std::isnan(y)) return true;
  return std::isinf(x) && std::isinf(y) && (x > 0) == (y > 0);
}

// FP16's overflow boundary (docs/tolerances.md "FP16's overflow boundary"): round to nearest even
// sends |x| >= 65520, the midpoint between 65504 (the largest finite value) and 2^16, to inf, so
// two pre-store values one FP32 rounding apart (65520.004 and 65519.996) store as inf and 65504.
// The pair: inf on one side, 65504 of the same sign on the other.
bool overflow_boundary_pair(uint16_t a, uint16_t b) {
  constexpr uint16_t kMaxFinite = 0x7bff, kInf = 0x7c00, kSign = 0x8000, kMagnitude = 0x7fff;
  if ((a & kSign) != (b & kSign)) return false;
  const uint16_t ma = a & kMagnitude, mb = b & kMagnitude;
  return (ma == kInf && mb == kMaxFinite) || (ma == kMaxFinite && mb == kInf);
}

// Stored, the pair is one FP16 step at 65504: 2^16 - 65504 = 32 = half_ulp_at(65504), one FP16 ULP
// (the inf counted as the 2^16 that rounding produced before the format ran out of exponent).
// Whether the class's elementwise limit at 65504 admits that step: fp16-state by max_ulp (>= 1) or
// its atol + rtol |ref|; the FP32-judged classes by atol + rtol |ref| (with no condition: the
// judge has none for the pre-store value); exact never.
constexpr double kBoundaryRef = 65504.0, kBoundaryStep = 32.0;
double boundary_step_ratio(TolClass cls, const Tolerance& t) {  // the step over its limit: <= 1 admits
  const double bound = t.atol + t.rtol * kBoundaryRef;
  switch (cls) {
    case TolClass::exact: return kInf;
    case TolClass::fp16_state: return std::min(scan::over(kBoundaryStep / half_ulp_at(kBoundaryRef), t.max_ulp),
                                               scan::over(kBoundaryStep, bound));
    default: return scan::over(kBoundaryStep, bound);
  }
}

bool finite_at(const Tensor& t, int64_t i) {
  return t.dtype() == DType::f16 ? half_is_finite(t.f16()[size_t(i)]) : std::isfinite(t.f32()[size_t(i)]);
}

std::string index_text(const std::vector<std::string>& axes, const std::vector<int64_t>& idx) {
  std::string s = "(";
  for (size_t d = 0; d < idx.size(); ++d)
    s += (d ? ", " : "") + (d < axes.size() ? axes[d] + " " : std::string()) + std::to_string(idx[d]);
  return s + ")";
}

}  // namespace

void detail::set_identical_fast_path(bool on) { g_identical_fast_path = on; }

TensorReport compare_tensor(const Tensor& ref, const Tensor& got, TolClass cls, const Tolerances& tols,
                            const Where& where, bool allow_zero_ref, const Tensor* condition) {
  TensorReport r;
  r.where = where;
  r.cls = cls;
  r.tol = tols.of(cls);
  r.shape = ref.shape_string();
  r.dtype = ref.dtype();
  r.axes = axis_names(where.tensor, ref.shape().size());
  r.elements = ref.size();
  r.histogram_labels = scan::bin_labels(cls);
  r.histogram.assign(r.histogram_labels.size(), 0);
  auto fail = [&r](std::string why) {
    r.pass = false;
    r.failure = std::move(why);
    if (!r.measured) r.error_ratio = kInf;  // nothing measured: beyond any tolerance
    return r;
  };

  if (ref.dtype() != got.dtype() || ref.shape() != got.shape())
    return fail("shape or dtype differs: " + where.ref_side + " " + ref.shape_string() + ", " + where.got_side + " " +
                got.shape_string());
  // the FP32-judged classes take a condition; exact has none, fp16-state counts FP16 ULPs
  const bool conditioned_class = cls == TolClass::output || cls == TolClass::output_f16 || cls == TolClass::fp32_state;
  const Tensor* cond = conditioned_class ? condition : nullptr;
  if (cond && (cond->dtype() != DType::f32 ||
               (cond->shape() != ref.shape() && !scan::column_condition(cond->shape(), ref.shape()))))
    return fail("condition tensor " + cond->shape_string() + " does not match " + where.ref_side + " " +
                ref.shape_string());
  r.conditioned = cond != nullptr;
  if (ref.size() == 0) {
    if (allow_zero_ref) return r;
    return fail(where.ref_side + " is empty: nothing would be checked");
  }

  // Non-finite values fail before any metric, unless both sides hold the same one at the same
  // element (same_non_finite: an overflow the contract allows, reproduced): then the element is
  // matched and left out of every metric. The reference is checked first (a broken reference is
  // an error of its own), then got. The first few bad elements are listed.
  // Bit-identical sides (every field a backend copied or left alone, every bitwise-equal
  // computation) hold the same non-finite values everywhere (all matched) and an error of 0 in
  // every element: below, the scan for unmatched non-finite values and the elementwise loop are
  // skipped; what they would add (ref^2 in the same order, the condition's squares, one histogram
  // count per element; every maximum, count and worst list stays 0) is added directly.
  // same_bits decides verdicts (below: an all-zero reference); identical only takes the shortcut
  // (off under detail::set_identical_fast_path(false), which must give the same report)
  const bool same_bits = ref.bytes() == got.bytes() && std::memcmp(ref.raw(), got.raw(), ref.bytes()) == 0;
  const bool identical = g_identical_fast_path && same_bits;
  const bool f16 = ref.dtype() == DType::f16;
  const bool non_finite = scan::any_non_finite_in(ref, got);
  // an FP16 tensor whose class admits one FP16 step at 65504 matches FP16's overflow boundary pair
  const double boundary_ratio = f16 ? boundary_step_ratio(cls, r.tol) : kInf;
  const bool boundary_admitted = boundary_ratio <= 1.0;
  std::vector<bool> matched_nf;
  auto match = [&](int64_t i, int64_t& count) {
    if (matched_nf.empty()) matched_nf.assign(size_t(ref.size()), false);
    matched_nf[size_t(i)] = true;
    ++count;
  };
  for (int64_t i = 0; i < (non_finite ? ref.size() : 0); ++i) {
    if (!finite_at(ref, i) && (identical || same_non_finite(ref, got, i))) match(i, r.non_finite_matched);
    else if (boundary_admitted && overflow_boundary_pair(ref.f16()[size_t(i)], got.f16()[size_t(i)]))
      match(i, r.overflow_boundary);
  }
  auto is_matched = [&](int64_t i) { return !matched_nf.empty() && matched_nf[size_t(i)]; };
  for (const Tensor* side : {&ref, &got}) {
    if (identical || !non_finite) break;
    const bool is_ref = side == &ref;
    int64_t count = 0, first = -1;
    for (int64_t i = 0; i < side->size(); ++i)
      if (!finite_at(*side, i) && !is_matched(i)) {
        if (first < 0) first = i;
        ++count;
        if (r.worst.size() < size_t(kWorstElements)) {
          Element e;
          e.index = unravel(ref.shape(), i);
          e.ref = ref.get(i);
          e.got = got.get(i);
          e.abs_err = e.rel_err = e.ulp = kInf;
          e.ref_bits = bits_of(ref, i);
          e.got_bits = bits_of(got, i);
          r.worst.push_back(e);
        }
      }
    if (count) {
      r.mismatched = count;
      const float v = side->get(first);
      const float other = (is_ref ? got : ref).get(first);
      return fail(fmt::format("{} non-finite value{} in {} without the same value on the other side, first {} (other "
                              "side {}) at {}", count, count > 1 ? "s" : "", is_ref ? where.ref_side : where.got_side, v, other,
                              index_text(r.axes, unravel(ref.shape(), first))));
    }
  }

  const scan::Squares sq = scan::sums(ref, got, matched_nf, scan::cond_view(cond, ref));
  r.above = sq.up;
  r.below = sq.down;
  const bool ref_zero = sq.zero;
  const double ref_sq = sq.ref;
  const int64_t finite_n = sq.n;
  const double ref_rms = finite_n ? std::sqrt(ref_sq / double(finite_n)) : 0.0;
  // Every element non-finite and the same on both sides (a step on overflowed state gives NaN
  // everywhere): positions and values were compared, and they agree.
  if (finite_n == 0 && r.non_finite_matched + r.overflow_boundary == ref.size()) {
    r.measured = true;
    if (r.overflow_boundary > 0) r.error_ratio = boundary_ratio;
    return r;
  }
  // An all-zero reference is refused (nothing passes vacuously) because a tolerance would let it
  // accept whatever small values got holds: atol admits a got that was never computed against a
  // reference that was never written. Bit-identical sides use no tolerance: an agreement in every
  // class (the legitimately zero output of an exact arm, docs/tolerances.md "All-zero references").
  if (ref_zero && !allow_zero_ref && !same_bits)
    return fail(where.ref_side + (finite_n ? " is all zero: nothing would be checked"
                                           : " has no finite element: nothing would be checked"));
  r.zero_ref = ref_zero;

  const Tolerance& t = r.tol;
  const bool scaled = cls == TolClass::fp16_state;
  const double sum_r2 = ref_sq, sum_d2 = sq.d, sum_c2 = sq.cond;  // d is 0 throughout on identical sides
  double need_atol = 0, need_rtol = 0, need_ulp = 0;
  const double ucond = t.cond * kUnitRoundoffF32;
  std::vector<std::pair<double, int64_t>> worst;  // (score, index), kept sorted descending
  if (identical) {  // what the elementwise loop would find (see above)
    r.histogram[0] += finite_n;
  } else {
    const scan::ScanSetup setup{cls, t, scan::cond_view(cond, ref), ref_rms, ref_zero};
    scan::ScanPart part = scan::elementwise(ref, got, matched_nf, setup);
    r.max_abs = part.max.abs;
    r.max_rel = part.max.rel;
    r.max_ulp = part.max.ulp;
    r.max_ulp_scaled = part.max.ulp_scaled;
    r.max_cond_ratio = part.max.cond_ratio;
    r.error_ratio = part.max.error_ratio;
    r.mismatched = part.mismatched;
    for (size_t b = 0; b < r.histogram.size(); ++b) r.histogram[b] += part.histogram[b];
    need_atol = part.max.need_atol;
    need_rtol = part.max.need_rtol;
    need_ulp = part.max.need_ulp;
    worst = std::move(part.worst);
  }
  for (const auto& [score, i] : worst) {
    Element e;
    e.index = unravel(ref.shape(), i);
    e.ref = ref.get(i);
    e.got = got.get(i);
    e.abs_err = std::fabs(e.got - e.ref);
    e.rel_err = e.abs_err == 0 ? 0 : (e.ref == 0 ? kInf : e.abs_err / std::fabs(e.ref));
    e.ulp = f16 ? double(ulp_distance_f16(ref.f16()[size_t(i)], got.f16()[size_t(i)]))
                : double(ulp_distance_f32(ref.f32()[size_t(i)], got.f32()[size_t(i)]));
    e.ulp_scaled = scaled ? e.abs_err / half_ulp_at(std::max(std::fabs(e.ref), ref_rms)) : 0.0;
    e.ref_bits = bits_of(ref, i);
    e.got_bits = bits_of(got, i);
    r.worst.push_back(e);
  }

  if (r.overflow_boundary > 0) {  // matched, one FP16 step apart: what it costs against the limit
    r.error_ratio = std::max(r.error_ratio, boundary_ratio);
    if (cls == TolClass::fp16_state && kBoundaryStep > t.atol + t.rtol * kBoundaryRef)
      need_ulp = std::max(need_ulp, kBoundaryStep / half_ulp_at(kBoundaryRef));
  }

  r.measured = true;
  r.nrmse = sum_r2 > 0 ? std::sqrt(sum_d2 / sum_r2) : (sum_d2 > 0 ? kInf : 0.0);
  // the whole-tensor guard gets the condition's share too: rms(d) <= max_nrmse rms(ref) + cond u rms(C)
  r.nrmse_allowed = t.max_nrmse + (sum_r2 > 0 ? ucond * std::sqrt(sum_c2 / sum_r2) : 0.0);
  if (cls != TolClass::exact && !ref_zero) r.error_ratio = std::max(r.error_ratio, scan::over(r.nrmse, r.nrmse_allowed));
  switch (cls) {
    case TolClass::exact: break;
    case TolClass::fp16_state:
      r.smallest_passing = Tolerance{t.atol, t.rtol, need_ulp, r.nrmse};
      break;
    case TolClass::fp32_state:
    case TolClass::output:
    case TolClass::output_f16:
      r.smallest_passing = Tolerance{std::max(0.0, need_atol), need_rtol, 0, r.nrmse};
      if (cond) r.smallest_passing.cond = r.max_cond_ratio;
      break;
  }

  if (r.mismatched) {
    const double pct = 100.0 * double(r.mismatched) / double(r.elements);
    if (ref_zero)
      return fail(fmt::format("{} is all zero (an untouched field) but {} has {} non-zero element{} ({:.4g}%)",
                              where.ref_side, where.got_side, r.mismatched, r.mismatched > 1 ? "s" : "", pct));
    return fail(fmt::format("{} of {} elements ({:.4g}%) outside the limits", r.mismatched, r.elements, pct));
  }
  if (cls != TolClass::exact && !ref_zero && r.nrmse > r.nrmse_allowed)
    return fail(cond ? fmt::format("normalised RMS error {:.4g} > {:.4g} (max_nrmse {:.4g} + the condition's share)",
                                   r.nrmse, r.nrmse_allowed, t.max_nrmse)
                     : fmt::format("normalised RMS error {:.4g} > max_nrmse {:.4g}", r.nrmse, t.max_nrmse));
  return r;
}

}  // namespace ssm::cmp
