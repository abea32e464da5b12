// Reference output norm of one value head (RMS norm, weight, SiLU or sigmoid output gate).
// Counterpart: cuda/gdn_output_norm.cu.
#include <cmath>

#include "reference/gdn_math.h"
#include "reference/underflow.h"

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

VecD output_norm_condition(const LayerSpec& s, const LayerWeights& w, const VecD& o, const VecD& S,
                           const float* z) {
  const double n = double(o.size());
  const double r = 1.0 / std::sqrt(o.squaredNorm() / n + double(s.eps));
  VecD c(o.size());
  if (r == 0.0) return c.setZero();  // an infinite element: the finite ones come out exactly 0, the others NaN
  const double spread = (o.cwiseAbs().array() * S.array()).sum() / n;  // mean_k |o_k| S_k
  for (Eigen::Index j = 0; j < o.size(); ++j) {
    const double zj = z[j];
    const double sig = 1.0 / (1.0 + std::exp(-zj));
    const double gate = s.output_gate == OutputGate::silu ? zj * sig : sig;
    // + the underflow of the stage's own three products (by r, the weight and the gate: reference/underflow.h)
    const double cj = std::fabs(double(w.norm_w[size_t(j)]) * gate);
    c[j] = with_underflow(cj * r * (S[j] + std::fabs(o[j]) * r * r * spread), 3);
  }
  return c;
}

}  // namespace ssm::ref
