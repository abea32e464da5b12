// Reference gates: beta = sigmoid(b), dt = softplus(min(a + dt_bias, 20)),
// A = exp(min(A_log, 20)), g = clamp(exp(-A dt), 1e-6, 1 - 1e-6). Counterpart: cuda/gdn_gates.cuh.
#include <algorithm>
#include <cmath>

#include "reference/gdn_math.h"

namespace ssm::ref {

Gates gates(const LayerSpec& s, const LayerWeights& w, const float* a, const float* b) {
  Gates out{VecD(s.nv), VecD(s.nv)};
  for (int vh = 0; vh < s.nv; ++vh) {
    out.beta[vh] = 1.0 / (1.0 + std::exp(-double(b[vh])));
    const double dt = std::log1p(std::exp(std::min(double(a[vh]) + double(w.dt_bias[size_t(vh)]), 20.0)));
    const double A = std::exp(std::min(double(w.A_log[size_t(vh)]), 20.0));
    out.g[vh] = std::clamp(std::exp(-A * dt), 1e-6, 1.0 - 1e-6);
  }
  return out;
}

}  // namespace ssm::ref
