// The elementwise work of one tensor comparison (compare_tensor.cpp): the non-finite scan, the
// sums (one sequential pass in index order), and the elementwise limits (maxima, mismatch count,
// histogram, worst elements) one element at a time or, on a CPU with AVX2 and F16C, four at a
// time, in chunks on several threads for a large tensor. Every way gives the same bits
// (tests/compare_tensor_test.cpp). Internal to compare/.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "compare/compare.h"

namespace ssm::cmp::scan {

// The labels of a class's histogram bins (at most 12): ULP bins for exact and fp16-state,
// absolute-error decades for the others.
std::vector<std::string> bin_labels(TolClass c);

// A measure over its limit: 1 at the limit; a zero limit leaves nothing but 0 (or inf).
double over(double value, double limit);

// A field's condition as the loops read it: element by element from a tensor of the field's
// shape, or from a per-column condition [nv][vd] of an h-like field [nv][kd][vd], which applies to
// every row of its column (core/state.h broadcast_condition's rule), read in place instead of
// widened into a field-sized copy.
struct CondView {
  const float* p = nullptr;  // null: no condition
  int64_t vd = 0, head = 0;  // per column: a row of vd columns, head = kd * vd elements a head
};
CondView cond_view(const Tensor* cond, const Tensor& field);
// Whether cond is a per-column condition of field (see CondView).
bool column_condition(const std::vector<int64_t>& cond, const std::vector<int64_t>& field);

// The inputs of the elementwise limits that every element shares.
struct ScanSetup {
  TolClass cls;
  const Tolerance& t;
  CondView cond;
  double ref_rms;
  bool ref_zero;
};

// The maxima of the elementwise loop. Each starts at 0 and only ever takes std::max(so far,
// value), which is order-free on the values the loop produces, so maxima of parts merge exactly.
struct Maxima {
  double abs = 0, rel = 0, ulp = 0, ulp_scaled = 0, cond_ratio = 0, error_ratio = 0;
  double need_atol = 0, need_rtol = 0, need_ulp = 0;  // the smallest passing tolerance's
  void merge(const Maxima& o) {
    for (auto f : {&Maxima::abs, &Maxima::rel, &Maxima::ulp, &Maxima::ulp_scaled, &Maxima::cond_ratio,
                   &Maxima::error_ratio, &Maxima::need_atol, &Maxima::need_rtol, &Maxima::need_ulp})
      this->*f = std::max(this->*f, o.*f);
  }
};

// What the elementwise loop finds over a range of elements: maxima, the mismatch count, the
// histogram and the range's worst elements. The parts of consecutive ranges merge (merge_part, in
// range order) into exactly what one pass over their union finds: maxima are order-free, counts
// add, and the worst lists merge as a top-K under the same total order. The sums, which are not
// order-free, are Squares' (one sequential pass before the loop).
struct ScanPart {
  Maxima max;
  int64_t mismatched = 0;
  std::array<int64_t, 12> histogram{};  // bin_of's bins (at most 12)
  std::vector<std::pair<double, int64_t>> worst;  // (score, index), sorted descending
};

// The sums of a comparison, over every element not in `matched`, in one sequential pass in index
// order (the only order-dependent results): the reference's squares, their count and whether
// every one is zero (its rms scales the fp32-state limit, so this pass runs before the elementwise
// loop); d^2 for d = got - ref and the condition's squares |cond|^2, in double. One pass with three
// independent sums is about as fast as one sum alone (each addition waits for the one before in
// its own sum only), and it leaves the elementwise loop free to run in chunks on several threads.
struct Squares {
  double ref = 0, d = 0, cond = 0;
  int64_t n = 0;
  int64_t up = 0, down = 0;  // elements with got > ref, got < ref (TensorReport::above, below)
  bool zero = true;
  // one element's terms (ref value v, d = got - ref, |cond| c), added in index order
  void add(double v, double diff, double c) {
    zero &= v == 0.0;
    ref += v * v;
    ++n;
    d += diff * diff;
    cond += c * c;
    up += diff > 0;
    down += diff < 0;
  }
};

// Whether either side holds an inf or NaN (a branch-free pass: most tensors have none, and then
// the non-finite bookkeeping is skipped).
bool any_non_finite_in(const Tensor& ref, const Tensor& got);

// The sums (see Squares) over every element not in `matched` (empty: none), in index order.
Squares sums(const Tensor& ref, const Tensor& got, const std::vector<bool>& matched, const CondView& c);

// The elementwise limits (see compare_tensor) over every element not in `matched`: one pass for a
// small tensor; for a large one, chunks of 32768 elements (detail::set_scan_chunk) on several
// threads, merged in chunk order; the part one pass in index order gives, bit for bit.
ScanPart elementwise(const Tensor& ref, const Tensor& got, const std::vector<bool>& matched, const ScanSetup& u);

}  // namespace ssm::cmp::scan
