// FP16's overflow threshold between two states that agree (docs/tolerances.md, "FP16's overflow
// boundary"): round to nearest even sends |x| >= 65520 to inf and 65504 <= |x| < 65520 to 65504, so
// two correct implementations whose FP32 values are one rounding apart across 65520 convert to inf
// and 65504. The comparison accepts them (the FP32 values agree; the FP16 pair is one step), but
// the next op that reads the element computes from inf on one side and from 65504 on the other,
// and the two differ by far more than any tolerance (a decode of an f16 pool: 58016 against the
// saturated 65504). A lockstep or a replay therefore hands the model side the other side's value
// of each such element once a comparison passed (Backend::adopt_elements), so both go on from
// the same conversion: the case is judged on what both computed, not on which side of a
// rounding midpoint its last bit fell.
#pragma once
#include <cstdint>
#include <vector>

#include "core/model.h"
#include "core/state.h"
#include "core/state_fields.h"

namespace ssm {

// One element of a sequence's state: a tensor field and the flat index in its layout.
struct StateElement {
  FieldKey field;
  int64_t index = 0;
};

// The elements of the FP32 h-like fields (h, the h checkpoint, the h intermediates, the f16-pool
// stage) on which `a` and `b`, two exports of one sequence, lie on opposite sides of FP16's
// overflow threshold: finite values of one sign of which one converts to FP16 inf and the other to
// 65504. A field present in one state only, or with another dtype or shape, has none. The caller
// decides that the states agree.
//
// FP16 fields have none, although the comparison accepts inf against the same-signed 65504 there
// (docs/tolerances.md): the stored bits alone cannot tell two roundings of 65520 apart from a
// converter that saturates where the contract overflows (a real bug, killed by the op after the
// store, which computes from inf on one side only). Only FP32 values that agree show the straddle.
std::vector<StateElement> fp16_overflow_straddles(const SequenceState& a, const SequenceState& b);

// Whether a pool of this h mode ever converts an FP32 h-like value to FP16 (f16: to_f16; f16-pool:
// every store): in f32 mode no straddle can matter, and the scan above is not run.
inline bool converts_h_to_f16(HMode m) { return m != HMode::f32; }

}  // namespace ssm
