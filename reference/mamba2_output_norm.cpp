// Reference Mamba-2 output stage: the gated RMS norm per group (Nemotron-H's MambaRMSNormGated
// with group_size = nh*hp/ng and norm_before_gate false; the true variant as an option; the layer's
// norm_groups 1 normalises the whole width, as Hugging Face's Mamba2 model does).
#include <cmath>

#include "reference/mamba2_math.h"
#include "reference/underflow.h"

namespace ssm::ref {

namespace {
double silu(double z) { return z / (1.0 + std::exp(-z)); }
}  // namespace

VecD mamba2_output_norm(const LayerSpec& s, const LayerWeights& w, const VecD& y, const float* z) {
  const Eigen::Index n = y.size(), group = n / s.norm_group_count();
  VecD u(n);
  for (Eigen::Index j = 0; j < n; ++j) u[j] = s.norm_before_gate ? y[j] : y[j] * silu(z[j]);
  VecD out(n);
  for (int g = 0; g < s.norm_group_count(); ++g) {
    const auto seg = u.segment(g * group, group);
    const double r = 1.0 / std::sqrt(seg.squaredNorm() / double(group) + double(s.eps));
    for (Eigen::Index j = g * group; j < (g + 1) * group; ++j)
      out[j] = u[j] * r * double(w.norm_w[size_t(j)]) * (s.norm_before_gate ? silu(z[j]) : 1.0);
  }
  return out;
}

VecD mamba2_output_norm_condition(const LayerSpec& s, const LayerWeights& w, const VecD& y, const VecD& S,
                                  const float* z) {
  const Eigen::Index n = y.size(), group = n / s.norm_group_count();
  // the normalised quantity u and its error Su; the factor c applied after the norm
  VecD u(n), Su(n), c(n);
  for (Eigen::Index j = 0; j < n; ++j) {
    const double g = silu(z[j]);
    u[j] = s.norm_before_gate ? y[j] : y[j] * g;
    Su[j] = s.norm_before_gate ? S[j] : S[j] * std::fabs(g);
    c[j] = std::fabs(double(w.norm_w[size_t(j)]) * (s.norm_before_gate ? g : 1.0));
  }
  VecD out(n);
  for (int g = 0; g < s.norm_group_count(); ++g) {
    const Eigen::Index b = g * group;
    const double r = 1.0 / std::sqrt(u.segment(b, group).squaredNorm() / double(group) + double(s.eps));
    if (r == 0.0) {  // an infinite element: the finite ones come out exactly 0, the others NaN, whatever rounds
      out.segment(b, group).setZero();
      continue;
    }
    const double spread = (u.segment(b, group).cwiseAbs().array() * Su.segment(b, group).array()).sum() / double(group);
    // + the underflow of the stage's own three products (by the gate, r and the weight: reference/underflow.h)
    for (Eigen::Index j = b; j < b + group; ++j)
      out[j] = with_underflow(c[j] * r * (Su[j] + std::fabs(u[j]) * r * r * spread), 3);
  }
  return out;
}

}  // namespace ssm::ref
