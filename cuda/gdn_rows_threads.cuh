// Where a thread of the delta-rule kernels (cuda/gdn_decode.cu, cuda/gdn_verify_wy.cu) sits in
// its work item's tile, and the sum over the tile's rows both kernels share, so the row kernel,
// the WY arm's exact redo and every tiling give the same bits.
// A warp holds kRowLanes thread rows by kColLanes thread columns: lane = ty_lo + kRowLanes *
// tx_lo, warp = ty_hi + ty_groups * tx_hi, ty = ty_lo + kRowLanes * ty_hi, tx = tx_lo + kColLanes
// * tx_hi. So a warp's access to one row of H spans kColLanes * VEC columns (FP32, VEC = 4: one
// 128-byte line) and a column's sum over rows is a butterfly over kRowLanes lanes, then the
// ty_groups warp partials in order through shared memory.
#pragma once
#include "cuda/common.cuh"
#include "cuda/gdn_rows.h"

namespace ssm::cuda {

struct RowsThread {
  int tx, ty, ty_hi;
};
__device__ __forceinline__ RowsThread rows_thread(const RowsParams& p) {
  const int lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32;
  RowsThread t;
  t.ty_hi = warp % p.ty_groups;
  t.ty = lane % kRowLanes + kRowLanes * t.ty_hi;
  t.tx = lane / kRowLanes + kColLanes * (warp / p.ty_groups);
  return t;
}

// The first half of a sum over the tile's rows of v (this thread's partial over its own rows, in
// row order): the butterfly over the warp's kRowLanes thread rows (group_sum), whose result the
// first of those lanes writes to part[ty_hi][tx * VEC ...] ([ty_groups][tx_pad * VEC] floats).
// Every lane must call it (shuffles); the caller then passes a barrier before rows_sum_collect.
template <int VEC>
__device__ __forceinline__ void rows_sum_publish(float (&v)[VEC], const RowsParams& p, const RowsThread& t,
                                                 float* part) {
  group_sum<VEC>(v, kRowLanes);
  if (t.ty % kRowLanes == 0) store_vec<VEC>(part + (size_t(t.ty_hi) * p.tx_pad + t.tx) * VEC, v);
}
// The second half: the ty_groups partials of this thread's columns, summed in order.
template <int VEC>
__device__ __forceinline__ void rows_sum_collect(float (&v)[VEC], const RowsParams& p, const RowsThread& t,
                                                 const float* part) {
#pragma unroll
  for (int e = 0; e < VEC; ++e) v[e] = 0.0f;
  for (int g = 0; g < p.ty_groups; ++g) {
    float x[VEC];
    load_vec<VEC>(part + (size_t(g) * p.tx_pad + t.tx) * VEC, x);
#pragma unroll
    for (int e = 0; e < VEC; ++e) v[e] = __fadd_rn(v[e], x[e]);
  }
}

}  // namespace ssm::cuda
