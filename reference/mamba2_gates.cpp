// Reference Mamba-2 gates: dt = softplus(dt + dt_bias) with torch's threshold (linear above 20),
// clamped to the layer's [dt_min, dt_max] (the model's time_step_limit),
// dA = max(exp(-exp(A_log) dt), 2^-149). No other clamp (docs/state-model.md, "Mamba-2").
#include <algorithm>
#include <cmath>

#include "reference/branches.h"
#include "reference/mamba2_math.h"

namespace ssm::ref {

Mamba2Gates mamba2_gates(const LayerSpec& s, const LayerWeights& w, const float* dt) {
  Mamba2Gates g{VecD(s.nh), VecD(s.nh)};
  for (int h = 0; h < s.nh; ++h) {
    const double x = double(dt[h]) + double(w.dt_bias[size_t(h)]);
    if (x > 20.0) count_branch(Branch::mamba2_softplus_threshold);
    const double sp = x > 20.0 ? x : std::log1p(std::exp(x));
    if (sp < double(s.dt_min)) count_branch(Branch::mamba2_dt_min);
    if (sp > double(s.dt_max)) count_branch(Branch::mamba2_dt_max);
    g.dt[h] = std::clamp(sp, double(s.dt_min), double(s.dt_max));
    // never 0: an underflowed decay keeps an infinite state infinite in every precision
    g.dA[h] = std::max(std::exp(-std::exp(double(w.A_log[size_t(h)])) * g.dt[h]), double(kMamba2MinDecay));
  }
  return g;
}

}  // namespace ssm::ref
