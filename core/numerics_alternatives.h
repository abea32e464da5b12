// The numerics an implementation may compute without declaring them: each single change of one
// convention of a declaration (core/layer_spec.h, Numerics), for the likely-cause checks that rerun
// a failing case or trace under it (fuzz/convention_hints.h, replay/convention_hints.h): "the case
// passes when the reference computes torch gates: declare them".
#pragma once
#include <string>
#include <vector>

#include "core/layer_spec.h"
#include "core/model.h"

namespace ssm {

struct NumericsAlternative {
  Numerics numerics;
  std::string flag;  // the command line's name for it: "--gates torch", "--f16-store inf", "--f16-rows carried"
  std::string what;  // "torch gates (softplus linear above 20, no clamps)"
};

// The single-convention changes of `n` that matter in h mode `mode`: the gates always; the FP16
// stores and the rows of one op only where h is FP16 (f16, f16-pool).
std::vector<NumericsAlternative> numerics_alternatives(const Numerics& n, HMode mode);

}  // namespace ssm
