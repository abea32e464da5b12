// Device helpers shared by the kernel families: FP16 conversions (core/half.h), the
// kernel-store clamp, deterministic block sums (fixed order, no atomics), and the global timer.
#pragma once
#include <cuda_fp16.h>
#include <cstdint>

#include "core/half.h"

namespace ssm::cuda {

// FP32 <-> FP16 converters of STATE-MODEL section 6, the very functions of core/half.h (host
// and device), so NaN payloads match the reference too (the hardware conversion would
// canonicalise them).
__device__ __forceinline__ uint16_t f32_to_f16_rne_bits(float f) { return ssm::float_to_half_rne(f); }
__device__ __forceinline__ float f16_bits_to_f32(uint16_t h) { return ssm::half_to_float(h); }

// Kernel store of FP16 state: clamp to +-65504, NaN -> -65504, then round to nearest even.
// fmaxf returns its other operand when one is NaN, so fmaxf(NaN, -65504) is the -65504 the
// contract asks for without a test of its own. The hardware RNE equals the reference converter
// on every finite input (TOOLING.md).
__device__ __forceinline__ __half store_half_clamped(float f) {
  return __float2half_rn(fminf(fmaxf(f, -65504.0f), 65504.0f));
}
// Two values stored as store_half_clamped stores each (the same bits), as one half2, clamped after
// the rounding, a pair per instruction: RNE takes (65504, 65520) to 65504 and from 65520 on to inf,
// which __hmin2 takes to 65504, as the float clamp first; NaN rounds to NaN, which __hmax2 replaces
// by its other operand, -65504, as fmaxf does. One half2 min and max per pair instead of a float
// min and max per value (tests/half_store_gpu_test.cpp checks both against core/half.h).
__device__ __forceinline__ __half2 store_half2_clamped(float a, float b) {
  return __hmin2(__hmax2(__floats2half2_rn(a, b), __float2half2_rn(-65504.0f)), __float2half2_rn(65504.0f));
}

// State element types: FP32 or FP16 storage, FP32 arithmetic.
template <typename HT> struct HStore;
template <> struct HStore<float> {
  static __device__ __forceinline__ float round(float x) { return x; }
};
template <> struct HStore<__half> {
  static __device__ __forceinline__ float round(float x) { return __half2float(store_half_clamped(x)); }
};

// Loads / stores of VEC consecutive state elements (VEC 1 or 4; 4 needs 16 B (FP32) or 8 B (FP16)
// alignment, which the pool guarantees when vd % 4 == 0).
template <int VEC> __device__ __forceinline__ void load_vec(const float* p, float* v) {
  if constexpr (VEC == 4) {
    const float4 t = *reinterpret_cast<const float4*>(p);
    v[0] = t.x; v[1] = t.y; v[2] = t.z; v[3] = t.w;
  } else {
    v[0] = *p;
  }
}
template <int VEC> __device__ __forceinline__ void load_vec(const __half* p, float* v) {
  if constexpr (VEC == 4) {
    const uint2 t = *reinterpret_cast<const uint2*>(p);
    const float2 a = __half22float2(*reinterpret_cast<const __half2*>(&t.x));
    const float2 b = __half22float2(*reinterpret_cast<const __half2*>(&t.y));
    v[0] = a.x; v[1] = a.y; v[2] = b.x; v[3] = b.y;
  } else {
    v[0] = __half2float(*p);
  }
}
// Stores values that are already rounded to the storage type (HStore::round), so the FP16
// conversion here is exact.
template <int VEC> __device__ __forceinline__ void store_vec(float* p, const float* v) {
  if constexpr (VEC == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    *p = v[0];
  }
}
template <int VEC> __device__ __forceinline__ void store_vec(__half* p, const float* v) {
  if constexpr (VEC == 4) {
    __half2 a = __floats2half2_rn(v[0], v[1]);
    __half2 b = __floats2half2_rn(v[2], v[3]);
    uint2 t;
    t.x = *reinterpret_cast<uint32_t*>(&a);
    t.y = *reinterpret_cast<uint32_t*>(&b);
    *reinterpret_cast<uint2*>(p) = t;
  } else {
    *p = __float2half_rn(v[0]);
  }
}

// Sum of N values per thread over the whole block, in a fixed order: butterfly within each
// warp, then warp partials in warp order. Every thread gets the same result. red needs
// N * (blockDim.x / 32) floats; blockDim.x must be a multiple of 32. Contains two barriers,
// so the caller may reuse red right after it returns.
template <int N>
__device__ __forceinline__ void block_sum(float (&v)[N], float* red) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
#pragma unroll
  for (int n = 0; n < N; ++n) {
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) v[n] = __fadd_rn(v[n], __shfl_xor_sync(0xffffffffu, v[n], o));
  }
  if (lane == 0) {
#pragma unroll
    for (int n = 0; n < N; ++n) red[n * nw + warp] = v[n];
  }
  __syncthreads();
#pragma unroll
  for (int n = 0; n < N; ++n) {
    float s = 0.0f;
    for (int w = 0; w < nw; ++w) s = __fadd_rn(s, red[n * nw + w]);
    v[n] = s;
  }
  __syncthreads();
}

// The decode instance of a row kernel (gdn_decode.cu, mamba2_rows.cu: template flag ONE_ROW):
// one row and no intermediates, the row loop and the intermediate store compiled away. The
// launchers pick it with runs_one_row; the kernels take their counts from RowSteps, which holds the
// same rule, so the instance and the launch never disagree.
template <typename Params> inline bool runs_one_row(const Params& p) { return p.R == 1 && p.n_inter == 0; }
template <bool ONE_ROW> struct RowSteps {
  int R, n_inter;  // rows; rows t < n_inter store their state as intermediate t
  template <typename Params>
  __device__ __forceinline__ explicit RowSteps(const Params& p) : R(ONE_ROW ? 1 : p.R), n_inter(ONE_ROW ? 0 : p.n_inter) {}
};

__device__ __forceinline__ float silu_f(float x) { return __fdiv_rn(x, __fadd_rn(1.0f, expf(-x))); }
__device__ __forceinline__ float sigmoid_f(float x) { return __fdiv_rn(1.0f, __fadd_rn(1.0f, expf(-x))); }

}  // namespace ssm::cuda

namespace ssm::cuda {
// Sums v[e] over each aligned group of `lanes` consecutive lanes (a power of two <= 32, the same
// in the whole warp): a butterfly, offsets lanes/2 down to 1. Every lane of a group ends with the
// same bits (each step adds the same two values, in either order, and __fadd_rn commutes). Every
// lane of the warp must call it (full-warp shuffles).
template <int VEC>
__device__ __forceinline__ void group_sum(float (&v)[VEC], int lanes) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    if (o < lanes) {
#pragma unroll
      for (int e = 0; e < VEC; ++e) v[e] = __fadd_rn(v[e], __shfl_xor_sync(0xffffffffu, v[e], o));
    }
  }
}
}  // namespace ssm::cuda

namespace ssm::cuda {
// The rows of a head's state that thread row ty holds in the delta-rule kernels (gdn_decode.cu,
// gdn_verify_wy.cu): rows i = ty*RPT + r < kd, VEC consecutive columns each.
// Stores those rows to h + i*vd (values already rounded to HT: HStore::round).
template <int RPT, int VEC, typename HT>
__device__ __forceinline__ void store_rows(const float (&H)[RPT][VEC], HT* h, int vd, int ty, int kd) {
#pragma unroll
  for (int r = 0; r < RPT; ++r) {
    const int i = ty * RPT + r;
    if (i < kd) store_vec<VEC>(h + size_t(i) * vd, H[r]);
  }
}

// The GPU's global nanosecond timer (%globaltimer): the delay and occupy test kernels spin on it.
__device__ __forceinline__ unsigned long long global_ns() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
}  // namespace ssm::cuda
