// Reference Mamba-2 state update and output of one head (STATE-MODEL section 3):
// H[p][n] <- dA H[p][n] + dt x[p] B[n]; y[p] = sum_n H[p][n] C[n] + D x[p].
#include <cmath>

#include "reference/mamba2_math.h"
#include "reference/underflow.h"

namespace ssm::ref {

void mamba2_ssm_update(MatD& H, const VecD& x, const VecD& B, double dt, double dA) {
  H = dA * H + (dt * x) * B.transpose();
}

VecD mamba2_ssm_output(const MatD& H, const VecD& C, const VecD& x, double D) { return H * C + D * x; }

VecD mamba2_ssm_output_condition(const MatD& H, const VecD& C, const VecD& x, double D) {
  const double rms = std::sqrt(H.squaredNorm() / double(H.size()));
  VecD S = H.cwiseAbs().cwiseMax(rms) * C.cwiseAbs() + (D * x).cwiseAbs();
  return S.unaryExpr([&](double s) { return with_underflow(s, C.size() + 1); });
}

}  // namespace ssm::ref
