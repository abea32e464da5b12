// Reference short convolution of every layer kind: window shift, depthwise conv over d_conv
// columns, bias, SiLU (STATE-MODEL section 3, step 1; Mamba-2's conv is this alone, GDN's adds the
// L2 norm of Q and K: gdn_conv.cpp). Counterpart: cuda/conv.cu.
#include <cmath>

#include "reference/gdn_math.h"

namespace ssm::ref {

VecD conv_silu_update(const LayerSpec& s, const LayerWeights& w, float* window, const float* x, VecD* err) {
  const int C = s.conv_dim(), D = s.d_conv;
  VecD y(C);
  if (err) *err = VecD::Zero(C);
  for (int c = 0; c < C; ++c) {
    float* win = window + size_t(c) * size_t(D);  // [d_conv], column 0 oldest
    for (int j = 0; j + 1 < D; ++j) win[j] = win[j + 1];
    win[D - 1] = x[c];
    double acc = s.conv_bias ? double(w.conv_bias[size_t(c)]) : 0.0;
    double mag = std::fabs(acc);  // sum of |terms|: the FP32 sum's error scale
    for (int j = 0; j < D; ++j) {
      const double term = double(w.conv_w[size_t(c) * size_t(D) + size_t(j)]) * double(win[j]);
      acc += term;
      mag += std::fabs(term);
    }
    const double sig = 1.0 / (1.0 + std::exp(-acc));
    y[c] = acc * sig;
    // silu'(x) = sig (1 + x (1 - sig)); the evaluation itself adds a rounding of |y|
    if (err) (*err)[c] = std::fabs(sig * (1.0 + acc * (1.0 - sig))) * mag + std::fabs(y[c]);
  }
  return y;
}

}  // namespace ssm::ref
