// Parameters and launch layout shared by the delta-rule kernels: the row kernel
// (cuda/gdn_decode.cu: decode, the exact verify arm, prefill) and the WY verify arm
// (cuda/gdn_verify_wy.cu). Both write the pre-norm output o = H^T q / sqrt(kd); the output
// norm is its own kernel (cuda/gdn_output_norm.cu).
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

#include "cuda/schedule.h"

namespace ssm::cuda {

struct RowsParams {
  const int* slots;        // [B] pool slot of each batch row (the dummy for padding rows)
  const int* inter_first;  // [max_slots + 2] first h intermediate of each slot (tiered capacities)
  char* h;                 // live h of slot s at h + s * h_pitch: [nv][kd][vd], vd fastest
  size_t h_pitch;          // bytes per slot
  char* h_inter;           // h intermediate t of slot s at h_inter + (inter_first[s] + t) * h_pitch
  const float* qkv;        // [B][R][conv_dim] conv outputs (Q, K normalised)
  const float* gb;         // [B][R][nv][2] g, beta
  float* o;                // out [B][R][nv*vd]: H^T q / sqrt(kd) from the stored state
  int B, R, n_inter;       // rows t < n_inter store their state as intermediate t
  int nk, nv, kd, vd;
  float qscale;            // 1/sqrt(kd)
  // Layout (rows_layout): work item (tile, vh, b) (one CTA of the WY kernel, one of a persistent
  // CTA's items in the row kernel) owns columns [tile*tj, tile*tj + tj) of head vh; thread
  // (tx, ty) (cuda/gdn_rows_threads.cuh) holds H[ty*RPT + r][tile*tj + tx*VEC + e] when
  // ty < ty_n and tx < tx_n; the block has ty_groups * kRowLanes thread rows and tx_pad thread
  // columns.
  int tx_n, ty_n, ty_groups, tx_pad, tj, ntiles;
  int in_vec4;  // row kernel: qkv and gb rows copy in 16- and 8-byte pieces (set by launch_gdn_rows)
  int mutants;  // device mutant bits (cuda/mutant_bits.h): 0 in shipped builds
  BlockOrder order;  // set by the launch (cuda/block_order.cuh)
};

// Lanes of a warp: kRowLanes thread rows by kColLanes thread columns (gdn_rows_threads.cuh).
constexpr int kRowLanes = 4, kColLanes = 8;

// VEC = 4 (16/8-byte vector access) when vd % 4 == 0, else 1; RPT = 32 / VEC rows per thread,
// so each thread keeps 32 state values in registers; ty_n = ceil(kd / RPT) <= 32 thread rows in
// ty_groups groups of kRowLanes. The column tile is as wide as max_threads allows (tx_n thread
// columns, a multiple of kColLanes unless the head is narrower; tx_pad rounds it up), then halved
// (down to 8 threads across) while there are fewer than min_ctas work items. The reductions run
// over rows only (in-thread over RPT in order, the butterfly over a warp's kRowLanes lanes, then
// the ty_groups partials in order), so the column tiling never changes a result bit.
struct RowsLayout {
  int vec, rpt, tx_n, ty_n, ty_groups, tx_pad, tj, ntiles, threads;
};
RowsLayout rows_layout(int kd, int vd, int nv, int B, int max_threads, int min_ctas);

}  // namespace ssm::cuda
