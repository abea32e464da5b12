// The PLE carry's rows on the GPU (STATE-MODEL section 7; docs/cuda.md "PLE carry"): the dilated
// depthwise conv over the carried rows, the output x + silu(y), the conv state and the token
// history advanced, and a verify's per-row snapshots. Counterpart: reference/ple_row.cpp.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace ssm::cuda {

struct PleRowsParams {
  const int* slots;      // [B] pool slots (the dummy for padding rows)
  float* conv;           // [slots][conv_rows][C], row 0 oldest
  float* snap;           // [slots][snaps][conv_rows][C]: verify snapshot t = the conv state after t rows
  int snaps;             // snapshots per slot
  int n_snap;            // snapshots this op writes (K for a verify, 0 otherwise)
  float* history;        // [slots][H] token ids, oldest first
  float* ids;            // [slots][H + snaps]: the history before the verify, then the verify's tokens
  const float* x;        // [B][R][C] the PLE rows
  const float* tokens;   // [B][R] token ids
  const float* w;        // [C][K] the conv taps
  float* out;            // [B][R][C] x + silu(y)
  int B, R, C, conv_rows, K, dilation, H;
};

// Types: FP32 (token ids are integers held in FP32). Launch: grid (ceil(C / 128), B), block 128;
// thread c of row b owns channel c of its slot's conv state for all R rows (no channel reads
// another's), and thread 0 of block (0, b) the slot's history and verify ids.
void launch_ple_rows(const PleRowsParams& p, cudaStream_t stream);

}  // namespace ssm::cuda
