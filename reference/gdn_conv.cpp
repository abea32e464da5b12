// Reference conv update: window shift, depthwise conv, SiLU, per-head L2 norm of Q and K.
// Counterpart: cuda/gdn_conv.cu.
#include <cmath>

#include "reference/gdn_math.h"

namespace ssm::ref {

VecD conv_update(const LayerSpec& s, const LayerWeights& w, float* window, const float* x) {
  const int C = s.conv_dim(), D = s.d_conv;
  VecD y(C);
  for (int c = 0; c < C; ++c) {
    float* win = window + size_t(c) * size_t(D);  // [d_conv], column 0 oldest
    for (int j = 0; j + 1 < D; ++j) win[j] = win[j + 1];
    win[D - 1] = x[c];
    double acc = s.conv_bias ? double(w.conv_bias[size_t(c)]) : 0.0;
    for (int j = 0; j < D; ++j) acc += double(w.conv_w[size_t(c) * size_t(D) + size_t(j)]) * double(win[j]);
    y[c] = acc / (1.0 + std::exp(-acc));
  }
  // Q heads then K heads: 2*nk heads of kd channels each
  for (int head = 0; head < 2 * s.nk; ++head) {
    auto seg = y.segment(Eigen::Index(head) * s.kd, s.kd);
    seg *= 1.0 / std::sqrt(seg.squaredNorm() + 1e-6);
  }
  return y;
}

}  // namespace ssm::ref
