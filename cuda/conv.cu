// Conv update + gates: the pre-kernel of every row-consuming op (decode, verify, prefill), both
// layer kinds. Types: windows, weights, inputs FP32; arithmetic FP32 (fmaf in window order).
// Shapes: window [conv_dim][d_conv] (column 0 oldest), x [B][R][conv_dim], qkv out [B][R][conv_dim].
// Launch: grid (norm_heads + ceil((conv_dim - norm_heads*norm_width) / CB), B), block CB threads
//   (GDN: roundup(kd, 32); Mamba-2: 128).
//   blockIdx.x < norm_heads: one GDN Q or K head (kd channels, thread = channel), L2-normalised per
//   row through a deterministic block sum; otherwise CB channels (silu only: GDN's V, every
//   Mamba-2 channel). Each thread keeps its channel's window in registers across the R rows,
//   writes the window after row t to conv intermediate t for t < n_inter, and the final window
//   back to the live state. Blocks with blockIdx.x == 0 also compute the gates of every
//   (row, head): GDN (g, beta), Mamba-2 (dt, dA).
// Counterpart: reference/conv.cpp, reference/gdn_gates.cpp, reference/mamba2_gates.cpp.
#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/conv.h"
#include "cuda/gdn_gates.cuh"
#include "cuda/mamba2_gates.cuh"
#include "cuda/mutant_bits.h"

namespace ssm::cuda {

namespace {
constexpr int kMaxDConv = 8;

__global__ void conv_kernel(ConvParams p) {
  __shared__ float red[32];
  const int row_b = blockIdx.y;
  const int slot = p.slots[row_b];
  const int conv_dim = p.conv_dim;
  const int D = p.d_conv;
  const int chunk = blockIdx.x;
  const bool is_qk = chunk < p.norm_heads;
  const int c = is_qk ? chunk * p.norm_width + int(threadIdx.x)
                      : p.norm_heads * p.norm_width + (chunk - p.norm_heads) * int(blockDim.x) + int(threadIdx.x);
  const bool valid = is_qk ? int(threadIdx.x) < p.norm_width : c < conv_dim;

  float win[kMaxDConv], w[kMaxDConv];
  float bias = 0.0f;
  float* live = p.conv + size_t(slot) * (p.conv_pitch / 4) + size_t(c) * D;
  if (valid) {
#pragma unroll
    for (int j = 0; j < kMaxDConv; ++j) {
      win[j] = j < D ? live[j] : 0.0f;
      w[j] = j < D ? p.conv_w[size_t(c) * D + j] : 0.0f;
    }
    if (p.conv_bias) bias = p.conv_bias[c];
  }
  for (int t = 0; t < p.R; ++t) {
    const size_t row = size_t(row_b) * p.R + t;
    float y = 0.0f;
    if (valid) {
      const float xin = p.x[row * conv_dim + c];
#pragma unroll
      for (int j = 0; j < kMaxDConv - 1; ++j)
        if (j + 1 < D) win[j] = win[j + 1];
#pragma unroll
      for (int j = 0; j < kMaxDConv; ++j)
        if (j == D - 1) win[j] = xin;
      float acc = bias;
#pragma unroll
      for (int j = 0; j < kMaxDConv; ++j)
        if (j < D) acc = __fmaf_rn(w[j], win[j], acc);
      y = silu_f(acc);
      if (t < p.n_inter) {
        float* inter = p.conv_inter + (size_t(slot) * p.conv_cap + t) * (p.conv_pitch / 4) + size_t(c) * D;
#pragma unroll
        for (int j = 0; j < kMaxDConv; ++j)
          if (j < D) inter[j] = win[j];
      }
    }
    if (is_qk) {  // uniform per block: every thread reaches the barriers
      float ss[1] = {__fmul_rn(y, y)};
      block_sum<1>(ss, red);
      y = __fmul_rn(y, __fdiv_rn(1.0f, sqrtf(__fadd_rn(ss[0], 1e-6f))));
    }
    if (valid) p.qkv[row * conv_dim + c] = y;
  }
  if (valid) {
#pragma unroll
    for (int j = 0; j < kMaxDConv; ++j)
      if (j < D) live[j] = win[j];
  }
  if (chunk == 0) {
    for (int vh = threadIdx.x; vh < p.gate_heads; vh += blockDim.x) {
      const float al = p.A_log[vh];
      float db = p.dt_bias[vh];
      if (SSM_DEVICE_MUTANT(p, kMutDtBiasBf16))  // mutant (bug class 10): FP32 read as BF16
        db = __uint_as_float(__float_as_uint(db) & 0xffff0000u);
      // mutant (bug class 5): the multi-row arms without the softplus threshold
      const float threshold = SSM_DEVICE_MUTANT(p, kMutNoSoftplusThreshold) && p.R > 1 ? INFINITY : 20.0f;
      for (int t = 0; t < p.R; ++t) {
        const size_t i = (size_t(row_b) * p.R + t) * p.gate_heads + vh;
        const float2 gb = p.mamba2 ? mamba2_gates(p.a[i], al, db, p.dt_min, p.dt_max, threshold)
                                   : gdn_gates(p.a[i], p.b[i], al, db, threshold);
        p.gb[2 * i] = gb.x;
        p.gb[2 * i + 1] = gb.y;
      }
    }
  }
}
}  // namespace

void launch_conv(const ConvParams& p, cudaStream_t stream) {
  if (p.d_conv < 1 || p.d_conv > kMaxDConv) throw std::invalid_argument("conv: d_conv out of range");
  const int cb = p.norm_heads > 0 ? (p.norm_width + 31) / 32 * 32 : 128;
  const int rest = p.conv_dim - p.norm_heads * p.norm_width;
  const int chunks = p.norm_heads + (rest + cb - 1) / cb;
  conv_kernel<<<dim3(unsigned(chunks), unsigned(p.B)), dim3(unsigned(cb)), 0, stream>>>(p);
  SSM_CUDA_LAUNCHED("conv_kernel");
}

}  // namespace ssm::cuda
