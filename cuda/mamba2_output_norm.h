// Launcher of the Mamba-2 output stage (cuda/mamba2_output_norm.cu).
#pragma once
#include <cuda_runtime_api.h>

namespace ssm::cuda {

struct Mamba2NormParams {
  const float* y;       // [rows][nh*hp] H C + D x
  const float* z;       // [rows][nh*hp] gate inputs
  const float* norm_w;  // [nh*hp]
  float* out;           // [rows][nh*hp]
  int rows, d_inner, ng;
  float eps;
  int norm_before_gate;  // 0 (Nemotron-H): normalise y silu(z); 1: normalise y, then multiply by silu(z)
};

void launch_mamba2_output_norm(const Mamba2NormParams& p, cudaStream_t stream);

}  // namespace ssm::cuda
