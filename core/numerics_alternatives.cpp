// The single-convention changes of a numerics declaration (see numerics_alternatives.h).
#include "core/numerics_alternatives.h"

namespace ssm {

std::vector<NumericsAlternative> numerics_alternatives(const Numerics& n, HMode mode) {
  std::vector<NumericsAlternative> v;
  Numerics g = n;
  g.gates = n.gates == GateMath::clamped ? GateMath::torch : GateMath::clamped;
  v.push_back({g, std::string("--gates ") + to_string(g.gates),
               g.gates == GateMath::torch ? "torch gates (softplus linear above 20, no clamps)"
                                          : "the contract's clamped gates"});
  if (mode == HMode::f32) return v;
  Numerics s = n;
  s.f16_store = n.f16_store == F16Store::saturate ? F16Store::inf : F16Store::saturate;
  v.push_back({s, std::string("--f16-store ") + to_string(s.f16_store),
               s.f16_store == F16Store::inf ? "FP16 stores that overflow to inf (triton's and torch's conversion)"
                                            : "FP16 stores that saturate at +-65504 (the contract's)"});
  Numerics r = n;
  r.f16_rows = n.f16_rows == F16Rows::stored ? F16Rows::carried : F16Rows::stored;
  v.push_back({r, std::string("--f16-rows ") + to_string(r.f16_rows),
               r.f16_rows == F16Rows::carried ? "rows carried in FP32 across one op (vLLM's and fla's kernels)"
                                              : "rows that read the stored FP16 state (the contract's)"});
  return v;
}

}  // namespace ssm
