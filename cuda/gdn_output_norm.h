// Launcher of the output norm (cuda/gdn_output_norm.cu).
#pragma once
#include <cuda_runtime_api.h>

namespace ssm::cuda {

struct NormParams {
  const float* o;       // [rows][nv*vd] pre-norm outputs
  const float* z;       // [rows][nv*vd] output gate inputs
  const float* norm_w;  // [vd]
  float* out;           // [rows][nv*vd]
  int rows, nv, vd;
  float eps;
  int sigmoid_gate;     // 0: out *= silu(z); 1: out *= sigmoid(z)
  int next_early;       // set by the launcher: the kernel after may launch once o is ready
};

void launch_gdn_output_norm(const NormParams& p, cudaStream_t stream);

}  // namespace ssm::cuda
