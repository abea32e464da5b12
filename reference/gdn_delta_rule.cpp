// Reference delta-rule update of one value head. Counterpart: cuda/gdn_decode.cu.
#include <cmath>

#include "reference/gdn_math.h"

namespace ssm::ref {

void delta_rule(MatD& H, const VecD& k, const VecD& v, double g, double beta) {
  const VecD hk = H.transpose() * k;       // [vd]
  const VecD vn = (v - g * hk) * beta;     // [vd]
  H = g * H + k * vn.transpose();          // [kd x vd]
}

void delta_rule_condition(const MatD& H, const VecD& k, const VecD& dk, const VecD& v, const VecD& dv, double g,
                          double gc, double beta, float* rho, float* S) {
  const Eigen::Index kd = H.rows(), vd = H.cols();
  Eigen::Map<Eigen::MatrixXf> Sm(S, kd, kd);  // symmetric: the storage order does not matter
  const VecD ka = k.cwiseAbs();
  const VecD hk_terms = H.cwiseAbs().transpose() * (gc * ka + dk);  // sum_i' gc |H_i'j k_i'| + |H_i'j| dk_i'
  const VecD vn = (v - g * (H.transpose() * k)) * beta;            // as delta_rule
  // the carried error through (I - beta k k^T): its share along k is erased as the state's is
  const Eigen::VectorXf kf = k.cast<float>();
  const Eigen::VectorXf Sk = Sm * kf;
  const double kSk = double(kf.dot(Sk));
  const double shrink = std::max(0.0, 1.0 - beta * (2.0 - beta * k.squaredNorm()) * kSk);
  double carried = 0;  // g^2 sum_j rho_j^2, before the update
  for (Eigen::Index j = 0; j < vd; ++j) carried += g * g * double(rho[j]) * double(rho[j]);
  VecD fresh_by_row = VecD::Zero(kd);  // sum_j local_ij^2
  double total = 0;
  for (Eigen::Index j = 0; j < vd; ++j) {
    const double via_k = beta * (std::fabs(v[j]) + dv[j] + g * hk_terms[j]);
    const double via_vn = 2.0 * std::fabs(vn[j]);
    double sq = 0;
    for (Eigen::Index i = 0; i < kd; ++i) {
      const double local = gc * g * std::fabs(H(i, j)) + (ka[i] + dk[i]) * via_vn + ka[i] * via_k;
      sq += local * local;
      fresh_by_row[i] += local * local;
    }
    const double r = std::sqrt(g * g * shrink * double(rho[j]) * double(rho[j]) + sq / double(kd));
    rho[j] = float(r);
    total += r * r;
  }
  if (total <= 0) return;  // nothing carried: S keeps its (irrelevant) shape
  // S <- the shape of the new carried error: the old one mapped through (I - beta k k^T), and the
  // fresh rounding of this row (independent per element: diagonal), weighted by their sizes
  const float fb = float(beta), w = float(carried / total);
  Sm.noalias() -= fb * (kf * Sk.transpose() + Sk * kf.transpose());
  Sm.noalias() += (fb * fb * float(kSk)) * (kf * kf.transpose());
  Sm *= w;
  Sm.diagonal() += (fresh_by_row / (double(kd) * total)).cast<float>();
}

}  // namespace ssm::ref
