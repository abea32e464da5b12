// The judge: compares tensors, outputs and whole sequence states under named tolerance
// classes and produces mismatch reports (human text and JSON). Implemented in
// compare/tolerance.cpp (classes, defaults, overrides), compare/compare_tensor.cpp (metrics;
// their elementwise work in compare/elementwise_scan.h), compare/report.cpp (text/JSON), compare/compare_state.cpp (fields, flags, outputs).
// Dumps (HDF5) are formats/dump.h. Tolerance defaults and their derivation: docs/tolerances.md.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "compare/lineage.h"
#include "core/model.h"
#include "core/state.h"
#include "core/tensor.h"

namespace ssm::cmp {

// exact: data movement (conv windows, copies, restores, untouched slots, arms promising equal bits).
// fp16_state: FP16 h against the emulated-storage reference (ULP bound + normalised error).
//   Its ULP unit is floored at the tensor's scale: an element's error counts in FP16 ULPs at
//   max(|ref|, rms(ref)), because one rounding flip at the head's scale leaks through H^T k
//   into every element of the column, so tiny elements see thousands of their own ULPs
//   (docs/tolerances.md).
// fp32_state: FP32 values against the FP64 reference, |d| <= atol + rtol*max(|ref|, rms(ref))
//   + cond*u*G (G: the state's condition carried through the rows, core/state.h HCondition),
//   and the normalised RMS error with the condition's share.
// output: per-token outputs, |d| <= atol + rtol*|ref| + cond*u*C (C: the output's condition,
//   Tolerance::cond), and the normalised RMS error with the condition's share.
// output_f16: per-token outputs of a step that read FP16 state (same metrics as output; the
//   rounded state makes them differ far more than outputs of FP32 state).
enum class TolClass { exact, fp16_state, fp32_state, output, output_f16 };
// "exact", "fp16-state", "fp32-state", "output", "output-f16"
const char* to_string(TolClass c);
TolClass parse_tol_class(const std::string& s);  // also accepts '_' for '-'; throws invalid_argument

struct Tolerance {
  double atol = 0, rtol = 0;  // elementwise: |got - ref| <= atol + rtol*|ref| (+ cond term)
  double max_ulp = 0;         // fp16_state: FP16 ULPs per element, at max(|ref|, rms(ref))
  double max_nrmse = 0;       // whole tensor: rms(got - ref) / rms(ref) (+ cond term)
  // fp32_state / output / output_f16, when the model side supplies the value's condition C (the
  // first-order error bound per unit roundoff, computed by the reference alongside the value: for
  // an output the dot product's, for FP32 state the recurrence's carried through the rows): each element
  // may also differ by cond * u * C_j and the whole tensor by cond * u * rms(C) / rms(ref) more,
  // u = 2^-24 (FP32 unit roundoff). An ill-conditioned element (a cancelling dot product) gets
  // the error FP32 arithmetic cannot avoid; a well-conditioned one gets essentially nothing.
  double cond = 0;
};
constexpr double kUnitRoundoffF32 = 5.9604644775390625e-08;  // 2^-24

struct Tolerances {
  Tolerance exact, fp16_state, fp32_state, output, output_f16;
  static Tolerances defaults();  // the one place the defaults live (docs/tolerances.md)
  const Tolerance& of(TolClass c) const;
  Tolerance& of(TolClass c);
  // "fp16-state.max_ulp=4,output.rtol=1e-3": throws std::invalid_argument naming the bad key.
  // Values must be finite and >= 0; `exact` has no tolerance to override.
  void override_from(const std::string& spec);
  void override_from_json(const nlohmann::json& j);  // {"fp16-state": {"max_ulp": 4}, ...}
  nlohmann::json json() const;
};

enum class Strictness { classes, bitwise };  // bitwise: every tensor under `exact`

// Class of a state field by what produced it. field: "h", "h_checkpoint", "h_intermediate[t]"
// (fp16_state when dtype is f16 or the value descends from FP16-stored state, else fp32_state),
// "conv", "conv_checkpoint", "conv_intermediate[t]" (exact: conv windows hold raw inputs),
// "h_prefill_stage" (fp16_state when it was widened from rounded h, else fp32_state), "output"
// (output_f16 when the step read state that descends from FP16 storage, else output).
// fp16_lineage: the field's value descends from a value rounded to FP16 (compare/lineage.h);
// FP32 state that never met FP16 storage keeps the FP32 classes in every pool mode.
// bitwise: always exact.
TolClass class_of(const std::string& field, DType dtype, Strictness strictness = Strictness::classes,
                  bool fp16_lineage = false);

// Spacing of FP16 values at magnitude |x| (2^-24 below the normal range): 2^(e - 11) for |x| =
// m 2^e, m in [0.5, 1). Inline and read from the exponent bits: fp16-state's elementwise loop calls
// it once per element (half_ulp_at_frexp is the same function through frexp and ldexp, kept for
// infinity, whose frexp exponent is the library's, and as the test's oracle).
double half_ulp_at_frexp(double x);
inline double half_ulp_at(double x) {
  x = std::fabs(x);
  if (!(x >= 6.103515625e-05)) return 5.9604644775390625e-08;  // subnormal spacing 2^-24 (NaN too)
  if (!(x <= 1.7976931348623157e308)) return half_ulp_at_frexp(x);  // infinity
  uint64_t bits;
  std::memcpy(&bits, &x, 8);
  // a normal double: biased exponent E, so e = E - 1022; 2^(e - 11) has biased exponent E - 10
  const uint64_t out = ((bits >> 52) - 10) << 52;
  double r;
  std::memcpy(&r, &out, 8);
  return r;
}
// Distance on the format's ordered integer line (sign-magnitude mapped to two's complement):
// +0 and -0 are 0 apart, adjacent representable values 1 apart, across zero it adds up.
// Inline: the elementwise loop of every comparison calls one per element (elementwise_scan.cpp),
// and a call there makes the loop keep its running maxima and sums in memory.
inline int64_t ulp_distance_f16(uint16_t a, uint16_t b) {
  auto ord = [](uint16_t h) -> int64_t { return (h & 0x8000u) ? -int64_t(h & 0x7fffu) : int64_t(h & 0x7fffu); };
  const int64_t d = ord(a) - ord(b);
  return d < 0 ? -d : d;
}
inline int64_t ulp_distance_f32(float a, float b) {
  auto ord = [](float f) -> int64_t {
    uint32_t x;
    std::memcpy(&x, &f, 4);
    return (x & 0x80000000u) ? -int64_t(x & 0x7fffffffu) : int64_t(x & 0x7fffffffu);
  };
  const int64_t d = ord(a) - ord(b);
  return d < 0 ? -d : d;
}

// Names of the logical axes of a tensor: h-like [nv][kd][vd] (Mamba-2 [nh][hp][ns]) -> (head, row,
// col); conv-like [conv_dim][d_conv] -> (channel, col); output [rows][nv][vd] (Mamba-2
// [rows][nh][hp]) -> (row, head, col); else i0..
std::vector<std::string> axis_names(const std::string& tensor, size_t rank);

// Where a tensor came from; printed in every report.
struct Where {
  int op_index = -1;
  std::string op;      // printable op, e.g. "verify 4 @0,1"
  int seq = -1;        // logical sequence
  int slot = -1;
  int layer = -1;
  std::string tensor;  // "h", "conv", "h_checkpoint", "conv_checkpoint", "h_intermediate[t]",
                       // "conv_intermediate[t]", "h_prefill_stage", "output"
  // What the two sides are, for every message and report: the side values are judged against
  // ("ref" in the code) and the side under judgement ("got"). The lockstep names the model and
  // the system under test ("reference", "cuda"), replay the trace and the backend that
  // recomputed it ("trace", "reference"), diff the two files ("A", "B").
  std::string ref_side = "ref", got_side = "got";
  std::string text() const;
};

struct Element {
  std::vector<int64_t> index;  // logical index, e.g. (head, row, col)
  double ref = 0, got = 0, abs_err = 0, rel_err = 0;
  double ulp = 0;         // distance on the storage format's ordered line
  double ulp_scaled = 0;  // fp16_state: |got - ref| in FP16 ULPs at max(|ref|, rms(ref))
  uint32_t ref_bits = 0, got_bits = 0;                          // raw storage bits (f16 or f32)
};

constexpr int kWorstElements = 5;  // elements listed per report

struct TensorReport {
  Where where;
  TolClass cls = TolClass::exact;
  Tolerance tol;
  bool pass = true;
  std::string failure;             // first reason: "non-finite got at (3, 1, 7)", "reference all zero", ...
  std::string shape;               // "[2, 8, 12] f16" (of the reference)
  std::vector<std::string> axes;   // names of the logical index axes
  DType dtype = DType::f32;
  bool zero_ref = false;           // reference all zero (allowed, or got identical): got must be all zero too
  bool measured = false;           // metrics below were computed (not for shape/dtype/non-finite)
  int64_t elements = 0, mismatched = 0;
  double max_abs = 0, max_rel = 0, max_ulp = 0, nrmse = 0;
  double max_ulp_scaled = 0;       // fp16_state: the judged ULP count (see TolClass)
  bool conditioned = false;        // a condition tensor widened the output limits (Tolerance::cond)
  int64_t non_finite_matched = 0;  // elements where both sides hold the same inf (or both NaN): matched
  // FP16 elements inf on one side and the same-signed 65504 on the other, in a class that admits one
  // FP16 step at 65504: a rounding across the overflow threshold 65520, matched (docs/tolerances.md)
  int64_t overflow_boundary = 0;
  // Finite elements (outside the matched ones) where got > ref and where got < ref: the direction
  // of the signed error, which a campaign tallies to find a systematic bias far below the
  // per-element limits (fuzz/bias.h).
  int64_t above = 0, below = 0;
  double max_cond_ratio = 0;       // max |d| / (u * C): the cond that alone would cover every element
  double nrmse_allowed = 0;        // max_nrmse plus the condition's share (what nrmse was judged against)
  std::vector<Element> worst;      // worst few, largest error first
  // exact: bins of the ULP distance; fp16_state: of the scaled ULPs; fp32_state and output*:
  // log10 bins of the absolute error. Labels name each bin.
  std::vector<int64_t> histogram;
  std::vector<std::string> histogram_labels;
  // The smallest tolerance that would have passed. fp32_state/output: atol with rtol kept, rtol
  // with atol kept (inf when a mismatch sits on a zero reference), max_nrmse, and (conditioned
  // outputs) cond with atol and rtol at 0. fp16_state:
  // max_ulp (atol/rtol kept) and max_nrmse. exact: nothing but identical bits passes (all 0).
  Tolerance smallest_passing;
  // Error over tolerance, one number per tensor (the HTML report's colour and growth curves):
  // the largest of each judged measure over its limit (an element's |d| over its bound; for
  // fp16-state the smaller of its scaled ULPs over max_ulp and |d| over the bound, since either
  // passes it; nrmse over nrmse_allowed). <= 1 passes. exact: 0 when every bit agrees, inf
  // otherwise; inf too for failures nothing was measured on (shape, non-finite, zero reference).
  double error_ratio = 0;
  std::string text() const;        // terminal report, never the whole tensor
  nlohmann::json json() const;
};

namespace detail {
// Test hook: compare_tensor takes a shortcut for bit-identical sides (the same report without
// per-element work); off, every comparison runs the elementwise loop (tests/compare_tensor_test.cpp
// checks that both give the same report).
void set_identical_fast_path(bool on);
// Test hook: a tensor of at least two chunks of this many elements (default 32768; <= 0: never)
// has its elementwise loop split into chunks run on several threads and merged; the report is the
// one pass's, bit for bit (tests/compare_tensor_test.cpp checks it with tiny chunks).
void set_scan_chunk(int64_t elements);
// Test hook: on a CPU with AVX2 the elementwise loop runs four elements at a time where no
// element is matched (default); off, one at a time everywhere. The report is the same, bit for bit
// (tests/compare_tensor_test.cpp checks it). On a CPU without AVX2 it stays off.
void set_scan_lanes(bool on);
bool scan_lanes_available();  // the CPU has AVX2
}  // namespace detail

// Compare one tensor. NaN/Inf in either side fails first, naming the element, unless both sides
// hold the same non-finite value there (the same infinity, or NaN and NaN: an FP16 overflow the
// contract allows, reproduced), or (FP16 tensors whose class admits one FP16 step at 65504) inf
// on one side and the same-signed 65504 on the other (FP16's overflow boundary: pre-store values
// one FP32 rounding apart across 65520); both are matched and left out of every metric; a reference that
// is all zero or non-finite is itself a failure (nothing passes vacuously: a tolerance would
// accept small garbage against it) unless got is bit for bit identical (no tolerance is used: an
// agreement in every class) or allow_zero_ref (legitimately zero tensors: fresh state, zero
// checkpoints): then got must be all zero as well.
// Different dtype or shape fails before anything else.
// condition (optional, f32): the model side's condition of each element (see Tolerance::cond),
// in the tensor's shape, or per column ([nv][vd] for a tensor [nv][kd][vd], Mamba-2's [nh][ns] for
// [nh][hp][ns]: every row of a column
// shares its condition, core/state.h broadcast_condition's rule, read in place); used by
// fp32-state and the output classes (exact has no tolerance, fp16-state counts FP16 ULPs).
TensorReport compare_tensor(const Tensor& ref, const Tensor& got, TolClass cls, const Tolerances& tol,
                            const Where& where, bool allow_zero_ref = false, const Tensor* condition = nullptr);

// Every compared tensor in brief (passing ones too): where, class, verdict and error over
// tolerance; the mismatch report itself for failures. What the HTML report draws (report/).
struct TensorMargin {
  Where where;
  TolClass cls = TolClass::exact;
  bool pass = true;
  double error_ratio = 0;  // TensorReport::error_ratio
  int64_t elements = 0;
  double max_abs = 0, nrmse = 0;
  int64_t above = 0, below = 0;  // TensorReport::above, below
  std::string shape;
  std::string report;  // TensorReport::text(), failures only
  static TensorMargin of(const TensorReport& r);
  std::string summary() const;  // one line: class, shape, max |d|, nrmse, error over tolerance
};

struct StateReport {
  int64_t tensors = 0;
  std::vector<TensorReport> failures;  // tensor mismatches and flag/presence/count mismatches
  std::vector<TensorMargin> margins;   // every tensor and flag compared, in order
  // What the divergence resembles, each with the check that confirmed it (compare/likely_cause.h);
  // compare_state fills it when it fails.
  std::vector<std::string> hints;
  bool pass() const { return failures.empty(); }
  void add(TensorReport r);  // records its margin, and keeps it when it failed
  std::string text() const;
  nlohmann::json json() const;
  void merge(StateReport other);
};

// Every field of every layer: h, conv, checkpoints (presence too), valid intermediates, flags,
// the staging blob. The class of each field follows class_of. Every state field is compared
// with allow_zero_ref (a fresh or untouched field is legitimately zero; then got must be zero
// too). Callers that know a tensor was computed check it with compare_tensor directly.
// Flag mismatches (h_is_f16, last_verify_k, layer count, checkpoint/stage presence, number of
// valid intermediates) are failures with tensor named after the flag and an explaining text.
// lineage: which FP32 fields descend from FP16-stored state (compare/lineage.h: the lockstep
// and replay track it op by op); FP16 fields are judged as FP16 by their dtype anyway.
// cache: reports of fields that passed before, reused when a field is unchanged on both sides
// (compare/field_cache.h; the same report, so the same verdict); null compares every field.
class FieldCache;
StateReport compare_state(const SequenceState& ref, const SequenceState& got, const Tolerances& tol,
                          const Where& base, Strictness strictness = Strictness::classes,
                          const FieldLineage& lineage = FieldLineage{}, FieldCache* cache = nullptr);
// The lineage a dump implies when its history is unknown (`diff`): in f16 and f16-pool modes every
// FP32 h-like field may descend from FP16 storage, so it is judged as such; in f32 mode none does.
FieldLineage assumed_lineage(HMode mode);
// Outputs of every layer as [rows][nv][vd] under `output`, or `output_f16` when the step read
// state that descends from FP16 storage (fp16_lineage); an all-zero reference fails unless the
// model certifies it with its condition or got is bit for bit identical (compare_tensor).
StateReport compare_outputs(const ModelSpec& spec, const StepOutputs& ref, const StepOutputs& got,
                            const Tolerances& tol, const Where& base,
                            Strictness strictness = Strictness::classes, bool fp16_lineage = false);

}  // namespace ssm::cmp
