// Conv update + gates: the pre-kernel of every row-consuming op (decode, verify, prefill), both
// layer kinds. Types: windows, weights, inputs FP32; arithmetic FP32 (fmaf in window order).
// Shapes: window [conv_dim][d_conv] (column 0 oldest), x [B][R][conv_dim], qkv out [B][R][conv_dim].
// Launch: grid (norm_heads + ceil((conv_dim - norm_heads*norm_width) / CB) + 1, B), block CB threads
//   (GDN: roundup(kd, 32); Mamba-2: 128). d_conv = 4 (the real models' width) moves each
//   window and weight row as one 16-byte access; other widths element by element.
//   blockIdx.x < norm_heads: one GDN Q or K head (kd channels, thread = channel), L2-normalised per
//   row through a deterministic block sum; otherwise CB channels (silu only: GDN's V, every
//   Mamba-2 channel). Each thread keeps its channel's window in registers across the R rows,
//   writes the window after row t to conv intermediate t for t < n_inter, and the final window
//   back to the live state. The last block of each batch row computes the gates of every
//   (row, head): GDN (g, beta), Mamba-2 (dt, dA). Launched as a programmatic dependent of the
//   kernel before it (cuda/dependent_launch.cuh): the weights are read before waiting for it;
//   the windows, the inputs and every write come after.
// Counterpart: reference/conv.cpp, reference/gdn_gates.cpp, reference/mamba2_gates.cpp.
#include "cuda/check.h"
#include "cuda/block_order.cuh"
#include "cuda/common.cuh"
#include "cuda/dependent_launch.cuh"
#include "cuda/conv.h"
#include "cuda/gdn_gates.cuh"
#include "cuda/mamba2_gates.cuh"
#include "cuda/mutant_bits.h"

namespace ssm::cuda {

namespace {
constexpr int kMaxDConv = 8;

// Window and weights of one channel: DC values (DC = 4: one 16-byte access; the pool's windows
// are [conv_dim][4] floats, so every channel's window is 16-byte aligned) or, for DC = 0, the
// runtime d_conv <= kMaxDConv values one by one.
template <int DC>
__device__ __forceinline__ void load_window(const float* src, int D, float* v) {
  if constexpr (DC == 4) {
    const float4 t = *reinterpret_cast<const float4*>(src);
    v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
  } else {
#pragma unroll
    for (int j = 0; j < kMaxDConv; ++j) v[j] = j < D ? src[j] : 0.0f;
  }
}
template <int DC>
__device__ __forceinline__ void store_window(float* dst, int D, const float* v) {
  if constexpr (DC == 4) {
    *reinterpret_cast<float4*>(dst) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
#pragma unroll
    for (int j = 0; j < kMaxDConv; ++j)
      if (j < D) dst[j] = v[j];
  }
}

// The gates of every (row, head) of batch row row_b: GDN (g, beta), Mamba-2 (dt, dA).
__device__ __forceinline__ void gates(const ConvParams& p, int row_b) {
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

template <int DC, bool ORDERED>
__global__ void conv_kernel(ConvParams p) {
  constexpr int NW = DC > 0 ? DC : kMaxDConv;  // window registers
  __shared__ float red[32];
  allow_dependents();  // the row kernel may launch and prefetch H; it waits for this kernel's end
  const uint2 lb = logical_block<ORDERED>(p.order);
  const int row_b = int(lb.y);
  int chunk = int(lb.x);
  // mutant (the one-wave conv window, tokenspeed #857's class): each Q/K head has a sibling block
  // after the gates block that recomputes its outputs from the live window, which the head's own
  // block commits in place at its end; right only while the sibling reads before that commit
  const bool one_wave_mutant = SSM_DEVICE_MUTANT(p, kMutConvOneWave) && p.norm_heads > 0;
  const int gates_block = int(logical_grid<ORDERED>(p.order).x) - 1 - (one_wave_mutant ? p.norm_heads : 0);
  const bool sibling = chunk > gates_block;
  if (sibling) chunk -= gates_block + 1;
  if (chunk == gates_block) {  // the gates block: beside the channels, not after a chunk's
    wait_for_previous();  // the kernels before may still read gb (the scratch is shared by the layers)
    gates(p, row_b);
    return;
  }
  const int conv_dim = p.conv_dim;
  const int D = DC > 0 ? DC : p.d_conv;
  const bool is_qk = chunk < p.norm_heads;
  const int c = is_qk ? chunk * p.norm_width + int(threadIdx.x)
                      : p.norm_heads * p.norm_width + (chunk - p.norm_heads) * int(blockDim.x) + int(threadIdx.x);
  const bool valid = is_qk ? int(threadIdx.x) < p.norm_width : c < conv_dim;

  float win[NW], w[NW];
  float bias = 0.0f;
  if (valid) {  // the weights first: nothing on the stream writes them
    load_window<DC>(p.conv_w + size_t(c) * D, D, w);
    if (p.conv_bias) bias = p.conv_bias[c];
  }
  // then the windows and x, and the writes to the scratch, which the kernels before may still read
  wait_for_previous();
  const int slot = p.slots[row_b];
  float* live = p.conv + size_t(slot) * (p.conv_pitch / 4) + size_t(c) * D;
  if (valid) load_window<DC>(live, D, win);
  for (int t = 0; t < p.R; ++t) {
    const size_t row = size_t(row_b) * p.R + t;
    float y = 0.0f;
    if (valid) {
      const float xin = p.x[row * conv_dim + c];
#pragma unroll
      for (int j = 0; j < NW - 1; ++j)
        if (j + 1 < D) win[j] = win[j + 1];
#pragma unroll
      for (int j = 0; j < NW; ++j)
        if (j == D - 1) win[j] = xin;
      float acc = bias;
#pragma unroll
      for (int j = 0; j < NW; ++j)
        if (j < D) acc = __fmaf_rn(w[j], win[j], acc);
      y = silu_f(acc);
      if (t < p.n_inter)
        store_window<DC>(p.conv_inter + (size_t(slot) * p.conv_cap + t) * (p.conv_pitch / 4) + size_t(c) * D, D, win);
    }
    if (is_qk) {  // uniform per block: every thread reaches the barriers
      float ss[1] = {__fmul_rn(y, y)};
      block_sum<1>(ss, red);
      y = __fmul_rn(y, __fdiv_rn(1.0f, sqrtf(__fadd_rn(ss[0], 1e-6f))));
    }
    if (valid) p.qkv[row * conv_dim + c] = y;
  }
  if (valid && !sibling) store_window<DC>(live, D, win);
}
}  // namespace

void launch_conv(const ConvParams& p, cudaStream_t stream, bool dependent) {
  if (p.d_conv < 1 || p.d_conv > kMaxDConv) throw std::invalid_argument("conv: d_conv out of range");
  const int cb = p.norm_heads > 0 ? (p.norm_width + 31) / 32 * 32 : 128;
  const int rest = p.conv_dim - p.norm_heads * p.norm_width;
  const int chunks = p.norm_heads + (rest + cb - 1) / cb;
  const int siblings = SSM_DEVICE_MUTANT(p, kMutConvOneWave) ? p.norm_heads : 0;  // mutant: see conv_kernel
  const dim3 grid(unsigned(chunks + 1 + siblings), unsigned(p.B));  // + the gates block
  const OrderedKernel<ConvParams> kernel = p.d_conv == 4 ? OrderedKernel<ConvParams>{&conv_kernel<4, false>, &conv_kernel<4, true>}
                                                          : OrderedKernel<ConvParams>{&conv_kernel<0, false>, &conv_kernel<0, true>};
  // plainly launched, its waits return at once
  launch_ordered("conv_kernel", kernel, grid, dim3(unsigned(cb)), 0, stream, dependent, p, &ConvParams::order);
}

}  // namespace ssm::cuda
