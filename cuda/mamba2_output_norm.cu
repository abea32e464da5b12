// Mamba-2 output stage of STATE-MODEL section 3 (Nemotron-H's gated RMS norm), per (row, group of
// G = nh*hp/ng channels): u = y silu(z) (or y when norm_before_gate),
// out = u / sqrt(mean(u^2) + eps) * norm_w (* silu(z) when norm_before_gate).
// Types: FP32. Shapes: y, z, out [rows][nh*hp]; norm_w [nh*hp].
// Launch: grid (ng, rows), block 256 threads; thread i takes channels i, i+256, ... of the group
//   in order, and mean(u^2) is a deterministic block sum of those partials, so every row's
//   output is the same bits whatever launch produced y. Launched as a programmatic dependent of
//   the row kernel. A group of at most 1024 channels (nemotron-h-8b's) is held in registers: its
//   gate inputs z (staged before the op's kernels) and weights are read, and the gates computed,
//   before the wait, during the row kernel's tail, and y is read once with all its loads in
//   flight together (the loop form, kept for wider groups, waited for each load in turn: 6.7 us
//   at B = 1 on the H200). Both forms do the same operations in the same order.
// Counterpart: reference/mamba2_output_norm.cpp.
#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/dependent_launch.cuh"
#include "cuda/mamba2_output_norm.h"

namespace ssm::cuda {

namespace {
constexpr int kThreads = 256;

constexpr int kHeld = 4;  // channels per thread held in registers: groups of up to 1024

// The norm's input u, 1 / rms from the block's sum of u^2, and its output, given y, the gate
// silu(z) and the weight: one formula for both forms of the kernel.
__device__ __forceinline__ float gated_input(const Mamba2NormParams& p, float y, float gate) {
  return p.norm_before_gate ? y : __fmul_rn(y, gate);
}
__device__ __forceinline__ float inverse_rms(const Mamba2NormParams& p, float sum_squares, int G) {
  return __fdiv_rn(1.0f, sqrtf(__fadd_rn(__fdiv_rn(sum_squares, float(G)), p.eps)));
}
__device__ __forceinline__ float normed_output(const Mamba2NormParams& p, float u, float rn, float w, float gate) {
  const float o = __fmul_rn(__fmul_rn(u, rn), w);
  return p.norm_before_gate ? __fmul_rn(o, gate) : o;
}

// A group of G <= kHeld * kThreads channels: thread i holds channels i + k kThreads, k < kHeld.
__global__ void __launch_bounds__(kThreads) mamba2_output_norm_held_kernel(Mamba2NormParams p) {
  __shared__ float red[kThreads / 32];
  const int G = p.d_inner / p.ng;
  const size_t base = size_t(blockIdx.y) * p.d_inner + size_t(blockIdx.x) * G;
  const float* w = p.norm_w + size_t(blockIdx.x) * G;
  float gate[kHeld], wv[kHeld], yv[kHeld];
#pragma unroll
  for (int k = 0; k < kHeld; ++k) {  // no kernel writes z or the weights
    const int j = int(threadIdx.x) + k * kThreads;
    gate[k] = j < G ? silu_f(p.z[base + j]) : 0.0f;
    wv[k] = j < G ? w[j] : 0.0f;
  }
  wait_for_previous();  // y from the row kernel (launched as its programmatic dependent)
  allow_dependents();   // the next kernel may launch; it waits for this one's end
#pragma unroll
  for (int k = 0; k < kHeld; ++k) {
    const int j = int(threadIdx.x) + k * kThreads;
    yv[k] = j < G ? p.y[base + j] : 0.0f;
  }
  float ss[1] = {0.0f};
#pragma unroll
  for (int k = 0; k < kHeld; ++k) {
    if (int(threadIdx.x) + k * kThreads >= G) break;
    const float u = gated_input(p, yv[k], gate[k]);
    ss[0] = __fmaf_rn(u, u, ss[0]);
  }
  block_sum<1>(ss, red);
  const float rn = inverse_rms(p, ss[0], G);
#pragma unroll
  for (int k = 0; k < kHeld; ++k) {
    const int j = int(threadIdx.x) + k * kThreads;
    if (j >= G) break;
    p.out[base + j] = normed_output(p, gated_input(p, yv[k], gate[k]), rn, wv[k], gate[k]);
  }
}

// Any group size: each thread's channels in a loop, read again for the output.
__global__ void __launch_bounds__(kThreads) mamba2_output_norm_kernel(Mamba2NormParams p) {
  __shared__ float red[kThreads / 32];
  wait_for_previous();  // a programmatic dependent (cuda/dependent_launch.cuh): everything before is written
  allow_dependents();   // the next kernel may launch; it waits for this one's end
  const int G = p.d_inner / p.ng;
  const size_t base = size_t(blockIdx.y) * p.d_inner + size_t(blockIdx.x) * G;
  float ss[1] = {0.0f};
  for (int j = threadIdx.x; j < G; j += kThreads) {
    const float u = gated_input(p, p.y[base + j], silu_f(p.z[base + j]));
    ss[0] = __fmaf_rn(u, u, ss[0]);
  }
  block_sum<1>(ss, red);
  const float rn = inverse_rms(p, ss[0], G);
  for (int j = threadIdx.x; j < G; j += kThreads) {
    const float gate = silu_f(p.z[base + j]);
    p.out[base + j] = normed_output(p, gated_input(p, p.y[base + j], gate), rn, p.norm_w[size_t(blockIdx.x) * G + j], gate);
  }
}
}  // namespace

void launch_mamba2_output_norm(const Mamba2NormParams& p, cudaStream_t stream) {
  if (p.rows == 0) return;
  const dim3 grid(unsigned(p.ng), unsigned(p.rows));
  if (p.d_inner / p.ng <= kHeld * kThreads)
    launch_dependent("mamba2_output_norm_held_kernel", &mamba2_output_norm_held_kernel, grid, dim3(kThreads), 0,
                     stream, p);
  else
    launch_dependent("mamba2_output_norm_kernel", &mamba2_output_norm_kernel, grid, dim3(kThreads), 0, stream, p);
}

}  // namespace ssm::cuda
