// Which thresholds and clamps of the math the reference reached, counted per thread as it
// computes: the campaigns' coverage of every branch of the contract (docs/fuzzing.md,
// "Coverage"). The lockstep takes (reads and resets) the counts around each op of the model.
#pragma once
#include <array>
#include <cstdint>
#include <optional>

#include "core/half.h"
#include "core/layer_spec.h"

namespace ssm::ref {

enum class Branch {
  softplus_threshold,    // a + dt_bias > 20: softplus of the clamped argument
  alog_clamp,            // A_log > 20: exp of the clamped A_log
  g_clamp_low,           // exp(-A dt) < 1e-6
  g_clamp_high,          // exp(-A dt) > 1 - 1e-6
  f16_store_clamp,       // a kernel store of FP16 h beyond +-65504 (clamped)
  f16_store_nan,         // a kernel store of FP16 h of NaN (-> -65504)
  f16_convert_overflow,  // the converter (to_f16, f16-pool narrow) rounded a finite value to inf
  mamba2_softplus_threshold,  // Mamba-2: dt + dt_bias > 20, softplus linear
  mamba2_dt_min,              // Mamba-2: softplus below the layer's dt_min (clamped up)
  mamba2_dt_max,              // Mamba-2: softplus above the layer's dt_max (clamped down)
  count
};
constexpr int kBranches = int(Branch::count);
const char* branch_name(Branch b);  // "softplus threshold", ...
// The layer kind whose math a branch belongs to; nullopt for the kind-independent ones (FP16 stores
// and the converter).
std::optional<LayerKind> branch_kind(Branch b);

void count_branch(Branch b);
std::array<int64_t, kBranches> take_branch_counts();  // this thread's counts since the last take
void add_branch_counts(const std::array<int64_t, kBranches>& counts);  // onto this thread's

// The FP32 -> FP16 converter (round to nearest even, no saturation), counting overflow to inf.
uint16_t convert_to_half(float f);

// The regions a kernel store of FP16 state reaches, whichever way it handles them. Inline, with
// the stores below: they run once per element of every head the reference stores.
inline void count_store_branches(float f) {
  if (f != f) count_branch(Branch::f16_store_nan);
  else if (f > 65504.0f || f < -65504.0f) count_branch(Branch::f16_store_clamp);
}
// A kernel's store of FP16 state (clamped, NaN -> -65504), counting both branches.
inline uint16_t store_half(float f) {
  count_store_branches(f);
  return store_half_clamped(f);
}
// The same store with torch's conversion (F16Store::inf): round to nearest even, overflow to inf;
// counts the same branches.
inline uint16_t store_half_inf(float f) {
  count_store_branches(f);
  return float_to_half_rne(f);
}

}  // namespace ssm::ref
