// The PLE carry's rows (see ple_rows.h). Per channel: y = sum_j w[c][j] X[(K-1-j)*dilation rows
// back], the taps in j order with one fused multiply-add each, out = x + silu(y); then the conv
// state drops its oldest row and appends x. The state lives in the pool (conv_rows can be 225);
// speed is not the point here, exactness is.
// Counterpart: reference/ple_row.cpp.
#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/ple_rows.h"

namespace ssm::cuda {

namespace {
constexpr int kThreads = 128;

__global__ void __launch_bounds__(kThreads) ple_rows_kernel(PleRowsParams p) {
  const int b = blockIdx.y;
  const int slot = p.slots[b];
  const int c = blockIdx.x * kThreads + threadIdx.x;
  const int RC = p.conv_rows * p.C;
  if (c < p.C) {
    float* state = p.conv + size_t(slot) * size_t(RC) + c;
    for (int t = 0; t < p.R; ++t) {
      if (t < p.n_snap) {  // snapshot t: the state after t rows (0: before the verify)
        float* snap = p.snap + (size_t(slot) * size_t(p.snaps) + size_t(t)) * size_t(RC) + c;
        for (int i = 0; i < p.conv_rows; ++i) snap[size_t(i) * p.C] = state[size_t(i) * p.C];
      }
      const size_t row = size_t(b) * p.R + t;
      const float x = p.x[row * p.C + c];
      float y = 0.0f;
      for (int j = 0; j < p.K; ++j) {
        const int back = (p.K - 1 - j) * p.dilation;
        const float v = back == 0 ? x : state[size_t(p.conv_rows - back) * p.C];
        y = __fmaf_rn(p.w[size_t(c) * p.K + j], v, y);
      }
      p.out[row * p.C + c] = __fadd_rn(x, silu_f(y));
      for (int i = 0; i + 1 < p.conv_rows; ++i) state[size_t(i) * p.C] = state[size_t(i + 1) * p.C];
      if (p.conv_rows > 0) state[size_t(p.conv_rows - 1) * p.C] = x;
    }
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {  // the history and, for a verify, what rebuilds it
    float* hist = p.history + size_t(slot) * p.H;
    float* ids = p.ids + size_t(slot) * size_t(p.H + p.snaps);
    if (p.n_snap > 0) {
      for (int i = 0; i < p.H; ++i) ids[i] = hist[i];
      for (int t = 0; t < p.n_snap; ++t) ids[p.H + t] = p.tokens[size_t(b) * p.R + t];
    }
    for (int t = 0; t < p.R; ++t) {
      for (int i = 0; i + 1 < p.H; ++i) hist[i] = hist[i + 1];
      hist[p.H - 1] = p.tokens[size_t(b) * p.R + t];
    }
  }
}
}  // namespace

void launch_ple_rows(const PleRowsParams& p, cudaStream_t stream) {
  if (p.B == 0 || p.R == 0) return;
  ple_rows_kernel<<<dim3(unsigned((p.C + kThreads - 1) / kThreads), unsigned(p.B)), dim3(kThreads), 0, stream>>>(p);
  SSM_CUDA_LAUNCHED("ple_rows_kernel");
}

}  // namespace ssm::cuda
