// Launcher of the Mamba-2 row kernel (cuda/mamba2_rows.cu): R rows of the selective state update
// per sequence on the state in registers. decode is R = 1; verify (either arm: Mamba-2 has no
// WY form, the rows of H are independent) is R = K with n_inter = K-1; prefill is R = T on FP32
// state. Decode runs the ONE_ROW instance of the same template (the row loop and the intermediate
// store compiled away), every other case the general one: the same operations per row in the same
// order, so verify equals K decodes bit for bit.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

#include "cuda/schedule.h"

namespace ssm::cuda {

struct Mamba2RowsParams {
  const int* slots;        // [B] pool slot of each batch row (the dummy for padding rows)
  const int* inter_first;  // [max_slots + 2] first h intermediate of each slot (tiered capacities)
  char* h;                 // live h of slot s at h + s * h_pitch: [nh][hp][ns], ns fastest
  size_t h_pitch;          // bytes per slot
  char* h_inter;           // h intermediate t of slot s at h_inter + (inter_first[s] + t) * h_pitch
  const float* xbc;        // [B][R][conv_dim] conv outputs x | B | C
  const float* gates;      // [B][R][nh][2] dt, dA
  const float* D;          // [nh]
  float* y;                // out [B][R][nh*hp]: H C + D x from the stored state (before the norm)
  int B, R, n_inter;       // rows t < n_inter store their state as intermediate t
  int nh, hp, ns, ng;
  int warps, ptiles;       // layout (mamba2_rows_layout)
  int mutants;  // device mutant bits (cuda/mutant_bits.h): 0 in shipped builds
  BlockOrder order;  // set by the launch (cuda/block_order.cuh)
};

// Layout: a warp owns RPW = vals / (VEC * NC) rows p of one head (at least 1); lane l holds
// columns n = (c * 32 + l) * VEC + e (c < NC, e < VEC) of each: VEC = 4 when ns % 4 == 0 (16/8-byte
// access to H; B and C 16-byte too where nh * hp % 4 == 0), else 1; NC = ceil(ns / (32 * VEC)),
// 1 or 2 with VEC 4, and with VEC 1 rounded up to 1, 2, 4 or 8 (the kernel's instances). vals
// (state values per thread) is 16, or 32 for an FP16 decode (VEC 4) whose 16-value grid has more
// than 4 CTAs per multiprocessor. A CTA has `warps` warps (<= 8) and covers warps * RPW
// rows; ptiles CTAs cover a head. Warps are halved while the grid has fewer than 2 CTAs per
// multiprocessor. Every sum runs over one row's columns inside one warp, so the layout never
// changes a result bit.
struct Mamba2RowsLayout {
  int vec, nc, vals, rpw, warps, ptiles;
};
// sms: the device's multiprocessors. Throws std::invalid_argument for ns outside 1..256 (the
// contract's bound).
Mamba2RowsLayout mamba2_rows_layout(int nh, int hp, int ns, int B, int sms, bool h_f16, bool one_row);

void launch_mamba2_rows(Mamba2RowsParams p, bool h_f16, int sms, cudaStream_t stream);

// Tests: FP16 decode (VEC 4) carries 16 or 32 state values per thread, chosen by the work (0, the
// default); 16 or 32 forces one, for every launch of this process until reset.
void force_mamba2_decode_values(int values);

}  // namespace ssm::cuda
