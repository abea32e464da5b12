// Launcher of the conv + gates pre-kernel (cuda/gdn_conv.cu).
#pragma once
#include <cuda_runtime_api.h>

namespace ssm::cuda {

struct ConvParams {
  const int* slots;       // [B] pool slot of each batch row (the dummy for padding rows)
  float* conv;            // live windows, slot s at conv + s * conv_pitch / 4: [conv_dim][d_conv]
  float* conv_inter;      // conv intermediates: slot s, row t at (s * conv_cap + t) * conv_pitch / 4
  size_t conv_pitch;      // bytes
  int conv_cap;
  const float* x;         // [B][R][conv_dim] pre-conv inputs
  const float* a;         // [B][R][nv]
  const float* b;         // [B][R][nv]
  const float* conv_w;    // [conv_dim][d_conv]
  const float* conv_bias; // [conv_dim] or null
  const float* A_log;     // [nv]
  const float* dt_bias;   // [nv]
  float* qkv;             // out [B][R][conv_dim]: silu(conv), Q and K L2-normalised per head
  float* gb;              // out [B][R][nv][2]: g, beta
  int B, R, n_inter;      // n_inter: rows t < n_inter also write conv intermediate t
  int nk, nv, kd, vd, d_conv;
  int mutants;  // device mutant bits (cuda/mutant_bits.h): 0 in shipped builds
};

void launch_gdn_conv(const ConvParams& p, cudaStream_t stream);

}  // namespace ssm::cuda
