// The judge: compares tensors, outputs and whole sequence states under named tolerance
// classes and produces mismatch reports (human text and JSON). Implemented in compare/*.cpp.
#pragma once
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/model.h"
#include "core/state.h"
#include "core/tensor.h"

namespace ssm::cmp {

// exact: data movement (conv windows, copies, restores, untouched slots, arms promising equal bits).
// fp16_state: FP16 h against the emulated-storage reference (ULP bound + normalised error).
// fp32_state / output: FP32 values against the FP64 reference (atol + rtol*|ref|, normalised RMS).
enum class TolClass { exact, fp16_state, fp32_state, output };
const char* to_string(TolClass c);
TolClass parse_tol_class(const std::string& s);

struct Tolerance {
  double atol = 0, rtol = 0;  // elementwise: |got - ref| <= atol + rtol*|ref|
  double max_ulp = 0;         // fp16_state: FP16 ULP distance per element
  double max_nrmse = 0;       // whole tensor: rms(got - ref) / rms(ref)
};

struct Tolerances {
  Tolerance exact, fp16_state, fp32_state, output;
  static Tolerances defaults();
  const Tolerance& of(TolClass c) const;
  Tolerance& of(TolClass c);
  // "fp16-state.max_ulp=4,output.rtol=1e-3": throws std::invalid_argument naming the bad key.
  void override_from(const std::string& spec);
  void override_from_json(const nlohmann::json& j);  // {"fp16-state": {"max_ulp": 4}, ...}
  nlohmann::json json() const;
};

// Where a tensor came from; printed in every report.
struct Where {
  int op_index = -1;
  std::string op;      // printable op, e.g. "verify 4 @0,1"
  int seq = -1;        // logical sequence
  int slot = -1;
  int layer = -1;
  std::string tensor;  // "h", "conv", "h_checkpoint", "conv_checkpoint", "h_intermediate[t]",
                       // "conv_intermediate[t]", "h_prefill_stage", "output"
  std::string text() const;
};

struct Element {
  std::vector<int64_t> index;  // logical index, e.g. (head, row, col)
  double ref = 0, got = 0, abs_err = 0, rel_err = 0, ulp = 0;
};

struct TensorReport {
  Where where;
  TolClass cls = TolClass::exact;
  Tolerance tol;
  bool pass = true;
  std::string failure;             // first reason: "non-finite got at (3, 1, 7)", "reference all zero", ...
  int64_t elements = 0, mismatched = 0;
  double max_abs = 0, max_rel = 0, max_ulp = 0, nrmse = 0;
  std::vector<Element> worst;      // worst few, largest error first
  std::vector<int64_t> histogram;  // log10 bins of the absolute error
  Tolerance smallest_passing;      // the smallest tolerance that would have passed
  std::string text() const;        // terminal report, never the whole tensor
  nlohmann::json json() const;
};

// Compare one tensor. NaN/Inf in either side fails first, naming the element; a reference that
// is all zero or non-finite is itself a failure (nothing passes vacuously) unless allow_zero_ref
// (legitimately zero tensors: fresh state, zero checkpoints).
TensorReport compare_tensor(const Tensor& ref, const Tensor& got, TolClass cls, const Tolerances& tol,
                            const Where& where, bool allow_zero_ref = false);

struct StateReport {
  int64_t tensors = 0;
  std::vector<TensorReport> failures;
  bool pass() const { return failures.empty(); }
  std::string text() const;
  nlohmann::json json() const;
  void merge(StateReport other);
};

enum class Strictness { classes, bitwise };  // bitwise: every tensor under `exact`

// Every field of every layer: h, conv, checkpoints (presence too), valid intermediates, flags,
// the staging blob. The class of each field follows what produced it (h-like fields by dtype).
StateReport compare_state(const SequenceState& ref, const SequenceState& got, const Tolerances& tol,
                          const Where& base, Strictness strictness = Strictness::classes);
StateReport compare_outputs(const ModelSpec& spec, const StepOutputs& ref, const StepOutputs& got,
                            const Tolerances& tol, const Where& base,
                            Strictness strictness = Strictness::classes);

}  // namespace ssm::cmp
