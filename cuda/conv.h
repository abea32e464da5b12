// Launcher of the conv + gates pre-kernel of both layer kinds (cuda/conv.cu).
#pragma once
#include <cuda_runtime_api.h>

#include "cuda/schedule.h"

namespace ssm::cuda {

struct ConvParams {
  const int* slots;       // [B] pool slot of each batch row (the dummy for padding rows)
  float* conv;            // live windows, slot s at conv + s * conv_pitch / 4: [conv_dim][d_conv]
  float* conv_inter;      // conv intermediates: slot s, row t at (s * conv_cap + t) * conv_pitch / 4
  size_t conv_pitch;      // bytes
  int conv_cap;
  const float* x;         // [B][R][conv_dim] pre-conv inputs (GDN Q|K|V, Mamba-2 x|B|C)
  const float* a;         // [B][R][gate_heads]: GDN a, Mamba-2 dt before dt_bias
  const float* b;         // [B][R][gate_heads]: GDN b; null for Mamba-2
  const float* conv_w;    // [conv_dim][d_conv]
  const float* conv_bias; // [conv_dim] or null
  const float* A_log;     // [gate_heads]
  const float* dt_bias;   // [gate_heads]
  float* qkv;             // out [B][R][conv_dim]: silu(conv); the first norm_heads heads L2-normalised
  float* gb;              // out [B][R][gate_heads][2]: GDN (g, beta), Mamba-2 (dt, dA)
  int B, R, n_inter;      // n_inter: rows t < n_inter also write conv intermediate t
  int conv_dim, d_conv;
  int norm_heads, norm_width;  // GDN: the 2*nk Q and K heads of kd channels; Mamba-2: 0
  int mamba2;                  // gates: 0 GDN (cuda/gdn_gates.cuh), 1 Mamba-2 (cuda/mamba2_gates.cuh)
  int gate_heads;              // GDN nv, Mamba-2 nh
  float dt_min, dt_max;        // Mamba-2's dt limits
  int mutants;  // device mutant bits (cuda/mutant_bits.h): 0 in shipped builds
  BlockOrder order;  // set by the launch (cuda/block_order.cuh)
};

// dependent = false: a plain launch, for when the kernel before wrote the H that the row kernel
// after it loads before its wait (this kernel lets that one launch before waiting itself)
void launch_conv(const ConvParams& p, cudaStream_t stream, bool dependent = true);

}  // namespace ssm::cuda
