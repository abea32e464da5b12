// Reference output norm of one value head (RMS norm, weight, SiLU or sigmoid output gate).
// Counterpart: cuda/gdn_output_norm.cu.
#include <cmath>

#include "reference/gdn_math.h"

namespace ssm::ref {

VecD output_norm(const LayerSpec& s, const LayerWeights& w, const VecD& o, const float* z) {
  const double r = 1.0 / std::sqrt(o.squaredNorm() / double(o.size()) + double(s.eps));
  VecD out(o.size());
  for (Eigen::Index j = 0; j < o.size(); ++j) {
    const double zj = z[j];
    const double sig = 1.0 / (1.0 + std::exp(-zj));
    const double gate = s.output_gate == OutputGate::silu ? zj * sig : sig;
    out[j] = o[j] * r * double(w.norm_w[size_t(j)]) * gate;
  }
  return out;
}

}  // namespace ssm::ref
