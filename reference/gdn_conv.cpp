// Reference GDN conv update: the short convolution (conv.cpp), then the per-head L2 norm of Q and K.
// Counterpart: cuda/conv.cu (the conv + gates kernel of both layer kinds).
#include <cmath>

#include "reference/gdn_math.h"

namespace ssm::ref {

VecD conv_update(const LayerSpec& s, const LayerWeights& w, float* window, const float* x, VecD* err) {
  VecD y = conv_silu_update(s, w, window, x, err);
  // Q heads then K heads: 2*nk heads of kd channels each
  for (int head = 0; head < 2 * s.nk; ++head) {
    auto seg = y.segment(Eigen::Index(head) * s.kd, s.kd);
    const double inv = 1.0 / std::sqrt(seg.squaredNorm() + 1e-6);
    seg *= inv;
    if (err) {
      // y_i / n moves by dy_i / n + |y_i / n| sum_i' |y_i' / n| dy_i' / n, plus its own rounding
      auto e = err->segment(Eigen::Index(head) * s.kd, s.kd);
      const double mix = seg.cwiseAbs().dot(e) * inv;
      e = (e * inv + seg.cwiseAbs() * mix + seg.cwiseAbs()).eval();
    }
  }
  return y;
}

}  // namespace ssm::ref
