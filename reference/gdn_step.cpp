// One token through one GDN layer with storage rounding at the GPU's store points.
// Used by decode, prefill and verify alike, so their rows agree bit for bit.
#include <cmath>

#include "reference/branches.h"
#include "reference/gdn_math.h"
#include "reference/head_store.h"
#include "reference/layer_parallel.h"
#include "reference/underflow.h"

namespace ssm::ref {


void gdn_step(const LayerSpec& s, const LayerWeights& w, Tensor& h, float* window,
              const float* x, const float* a, const float* b, const float* z, float* out, float* cond,
              StateCondition* h_cond, Tensor* carried) {
  // the state's carried condition: RMS error per column and its shape (FP16 h is judged in FP16
  // ULPs, never by it: skipped there, conv errors included)
  const bool track_condition = h_cond && h.dtype() == DType::f32;
  VecD yerr;  // the conv outputs' FP32 error per unit roundoff, for the state's condition
  const VecD y = conv_update(s, w, window, x, track_condition ? &yerr : nullptr);  // [conv_dim]: Q | K | V
  const Gates gt = gates(s, w, a, b);
  const double qscale = 1.0 / std::sqrt(double(s.kd));
  parallel_parts(s.nv, heads_in_parallel(s), [&](size_t head) {  // heads are independent
    const int vh = int(head);
    const int kh = s.key_head(vh);
    const VecD q = y.segment(Eigen::Index(kh) * s.kd, s.kd);
    const VecD k = y.segment(Eigen::Index(s.nk + kh) * s.kd, s.kd);
    const VecD v = y.segment(Eigen::Index(2 * s.nk * s.kd) + Eigen::Index(vh) * s.vd, s.vd);
    const int64_t base = int64_t(vh) * s.kd * s.vd;
    MatD H = load_head(carried ? *carried : h, base, s.kd, s.vd);
    if (track_condition)
      delta_rule_condition(H, k, yerr.segment(Eigen::Index(s.nk + kh) * s.kd, s.kd), v,
                           yerr.segment(Eigen::Index(2 * s.nk * s.kd) + Eigen::Index(vh) * s.vd, s.vd), gt.g[vh],
                           gt.g_cond[vh], gt.beta[vh], h_cond->rho.f32() + size_t(vh) * size_t(s.vd),
                           h_cond->shape.f32() + size_t(vh) * size_t(s.kd) * size_t(s.kd));
    delta_rule(H, k, v, gt.g[vh], gt.beta[vh]);
    const MatD stored = store_head(s.numerics.f16_store, h, base, H);
    // the UPDATED state: as stored, or (carried rows) the FP32 state the next row continues from
    const MatD carried_stored = carried ? store_head(s.numerics.f16_store, *carried, base, H) : MatD();
    const MatD& Hs = carried ? carried_stored : stored;  // a reference: no copy of the head
    const VecD o = Hs.transpose() * q * qscale;
    const VecD o_normed = output_norm(s, w, o, z + size_t(vh) * size_t(s.vd));
    for (int j = 0; j < s.vd; ++j) out[size_t(vh) * size_t(s.vd) + size_t(j)] = float(o_normed[j]);
    if (cond) {
      const VecD S = gdn_output_dot_condition(Hs, q, qscale);
      const VecD c = output_norm_condition(s, w, o, S, z + size_t(vh) * size_t(s.vd));
      for (int j = 0; j < s.vd; ++j) cond[size_t(vh) * size_t(s.vd) + size_t(j)] = float(c[j]);
    }
  });
}

Tensor widen_to_f32(const Tensor& h16) {
  Tensor h = Tensor::zeros(DType::f32, h16.shape());
  for (int64_t i = 0; i < h16.size(); ++i) h.f32()[i] = h16.get(i);
  return h;
}

VecD gdn_output_dot_condition(const MatD& H, const VecD& q, double qscale) {
  const double rms = std::sqrt(H.squaredNorm() / double(H.size()));
  const VecD S = H.cwiseAbs().cwiseMax(rms).transpose() * q.cwiseAbs() * qscale;
  return S.unaryExpr([&](double s) { return with_underflow(s, q.size() + 1); });
}

StateCondition fresh_gdn_state_condition(const LayerSpec& s) {
  StateCondition c{Tensor::zeros(DType::f32, {s.nv, s.vd}), Tensor::zeros(DType::f32, {s.nv, s.kd, s.kd})};
  for (int vh = 0; vh < s.nv; ++vh)
    for (int i = 0; i < s.kd; ++i) c.shape.f32()[(size_t(vh) * size_t(s.kd) + size_t(i)) * size_t(s.kd) + size_t(i)] = 1.0f / float(s.kd);
  return c;
}

}  // namespace ssm::ref
