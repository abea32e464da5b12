// The PLE carry's row (see ple_math.h). Counterpart: cuda/ple_rows.cu.
#include <algorithm>
#include <cmath>

#include "reference/ple_math.h"

namespace ssm::ref {

void ple_row(const LayerSpec& s, const LayerWeights& w, PleCarry& c, const LayerRows& r, size_t t, float* out,
             float* cond) {
  const PleSpec& p = s.ple;
  const int C = p.channels, R = p.conv_rows(), K = p.k_size;
  const float* x = r.ple_x.data() + t * size_t(C);
  float* state = c.conv.f32();  // [R][C], row 0 oldest
  for (int ch = 0; ch < C; ++ch) {
    double y = 0, mag = 0;  // the sum and the sum of |terms|
    for (int j = 0; j < K; ++j) {
      const int back = (K - 1 - j) * p.dilation;  // rows back from the new one; 0 is x itself
      const double v = back == 0 ? x[ch] : state[size_t(R - back) * size_t(C) + size_t(ch)];
      const double term = double(w.ple_w[size_t(ch) * size_t(K) + size_t(j)]) * v;
      y += term;
      mag += std::fabs(term);
    }
    const double sig = 1.0 / (1.0 + std::exp(-y));
    const double silu = y * sig;
    out[ch] = float(double(x[ch]) + silu);
    if (cond) {
      // FP32: the sum of K products errs by at most K u sum|terms|, which silu passes on scaled by
      // |silu'(y)| <= 1.1; silu itself (exp, divide, multiply) by a few u |silu|; the add by u |out|.
      const double dsilu = sig * (1.0 + y * (1.0 - sig));
      cond[ch] = float(std::fabs(double(x[ch])) + 5.0 * std::fabs(silu) + std::fabs(dsilu) * double(K + 1) * mag);
    }
  }
  if (R > 0) {  // the conv state: drop the oldest row, append x
    std::copy(state + C, state + size_t(R) * size_t(C), state);
    std::copy(x, x + C, state + size_t(R - 1) * size_t(C));
  }
  float* h = c.history.f32();  // the history: drop the oldest id, append the token
  const int H = p.history_len();
  std::copy(h + 1, h + H, h);
  h[H - 1] = r.ple_tokens[t];
}

}  // namespace ssm::ref
