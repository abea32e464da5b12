// A thread's state values in registers, for the row kernels (gdn_decode.cu, mamba2_rows.cu).
#pragma once
#include <cuda_fp16.h>

#include <cstdint>

#include "cuda/common.cuh"

namespace ssm::cuda {

// The thread's RPT x VEC state values in registers. FP32 (and FP16 with VEC = 1) as floats;
// FP16 with VEC = 4 as half2 pairs (kPairs), 16 registers instead of 32 (GDN's 4-CTA build spilled
// 104 bytes at 64 registers holding floats; Mamba-2's FP16 decode instance needs 48 registers
// instead of 56): every value a kernel carries is FP16 already (loaded from FP16 state, or a
// clamped store of the update), so a pair holds it exactly, get() returns the very float the FP32
// registers held, and set_row rounds as HStore::round does (clamp to +-65504, NaN to -65504,
// RNE): the same bits.
template <typename HT, int RPT, int VEC>
struct HRegs {
  static constexpr bool kPairs = false;
  float v[RPT][VEC];
  __device__ __forceinline__ float get(int r, int e) const { return v[r][e]; }
  __device__ __forceinline__ void clear(int r) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[r][e] = 0.0f;
  }
  __device__ __forceinline__ void load(int r, const HT* p) { load_vec<VEC>(p, v[r]); }
  __device__ __forceinline__ void store(int r, HT* p) const { store_vec<VEC>(p, v[r]); }
  __device__ __forceinline__ void set_row(int r, const float (&x)[VEC]) {
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[r][e] = HStore<HT>::round(x[e]);
  }
};
template <int RPT>
struct HRegs<__half, RPT, 4> {
  static constexpr bool kPairs = true;
  __half2 v[RPT][2];
  __device__ __forceinline__ float get(int r, int e) const {
    return (e & 1) ? __high2float(v[r][e >> 1]) : __low2float(v[r][e >> 1]);
  }
  __device__ __forceinline__ void clear(int r) { v[r][0] = v[r][1] = __float2half2_rn(0.0f); }
  __device__ __forceinline__ void load(int r, const __half* p) {
    const uint2 t = *reinterpret_cast<const uint2*>(p);
    v[r][0] = *reinterpret_cast<const __half2*>(&t.x);
    v[r][1] = *reinterpret_cast<const __half2*>(&t.y);
  }
  __device__ __forceinline__ void store(int r, __half* p) const {
    uint2 t;
    t.x = *reinterpret_cast<const uint32_t*>(&v[r][0]);
    t.y = *reinterpret_cast<const uint32_t*>(&v[r][1]);
    *reinterpret_cast<uint2*>(p) = t;
  }
  // store_half_clamped's bits a pair at a time (FP16 row steps run 8.5 instead of 9.5
  // instructions per value, against FP32's 4)
  __device__ __forceinline__ void set_row(int r, const float (&x)[4]) {
    v[r][0] = store_half2_clamped(x[0], x[1]);
    v[r][1] = store_half2_clamped(x[2], x[3]);
  }
};

}  // namespace ssm::cuda
