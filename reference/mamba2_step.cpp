// One token through one Mamba-2 layer with storage rounding at the GPU's store points; used by
// decode, prefill and verify alike (through layer_step.cpp), so their rows agree bit for bit.
#include <cmath>

#include "reference/head_store.h"
#include "reference/layer_parallel.h"
#include "reference/mamba2_math.h"

namespace ssm::ref {

void mamba2_step(const LayerSpec& s, const LayerWeights& w, Tensor& h, float* window, const float* xBC,
                 const float* dt, const float* z, float* out, float* cond, Tensor* carried) {
  const VecD xbc = conv_silu_update(s, w, window, xBC);  // [x | B | C]
  const Mamba2Gates gt = mamba2_gates(s, w, dt);
  const Eigen::Index di = s.d_inner(), gs = s.ns;
  VecD y(di), S(di);
  parallel_parts(s.nh, heads_in_parallel(s), [&](size_t head) {  // heads are independent
    const int hh = int(head);
    const int g = s.group_of(hh);
    const VecD x = xbc.segment(Eigen::Index(hh) * s.hp, s.hp);
    const VecD B = xbc.segment(di + Eigen::Index(g) * gs, gs);
    const VecD C = xbc.segment(di + Eigen::Index(s.ng + g) * gs, gs);
    const int64_t base = int64_t(hh) * s.hp * s.ns;
    MatD H = load_head(carried ? *carried : h, base, s.hp, s.ns);
    mamba2_ssm_update(H, x, B, gt.dt[hh], gt.dA[hh]);
    const MatD stored = store_head(s.numerics.f16_store, h, base, H);
    const MatD carried_stored = carried ? store_head(s.numerics.f16_store, *carried, base, H) : MatD();
    const MatD& Hs = carried ? carried_stored : stored;  // a reference: no copy of the head
    const double D = double(w.D[size_t(hh)]);
    y.segment(Eigen::Index(hh) * s.hp, s.hp) = mamba2_ssm_output(Hs, C, x, D);
    if (cond) S.segment(Eigen::Index(hh) * s.hp, s.hp) = mamba2_ssm_output_condition(Hs, C, x, D);
  });
  const VecD o = mamba2_output_norm(s, w, y, z);
  for (Eigen::Index j = 0; j < di; ++j) out[j] = float(o[j]);
  if (cond) {
    const VecD c = mamba2_output_norm_condition(s, w, y, S, z);
    for (Eigen::Index j = 0; j < di; ++j) cond[j] = float(c[j]);
  }
}

}  // namespace ssm::ref
