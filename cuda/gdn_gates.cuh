// Gates of STATE-MODEL section 3 step 2 in FP32: beta = sigmoid(b),
// dt = softplus(min(a + dt_bias, 20)), A = exp(min(A_log, 20)), g = clamp(exp(-A dt), 1e-6, 1 - 1e-6).
// Every arm (decode, verify exact and WY, prefill) reads g and beta from the conv kernel, which
// is the only caller. Counterpart: reference/gdn_gates.cpp.
#pragma once
#include "cuda/common.cuh"

namespace ssm::cuda {

// threshold: the softplus argument clamp (20); only a mutant passes another value.
__device__ __forceinline__ float2 gdn_gates(float a, float b, float A_log, float dt_bias, float threshold = 20.0f) {
  const float beta = sigmoid_f(b);
  const float dt = log1pf(expf(fminf(__fadd_rn(a, dt_bias), threshold)));
  const float A = expf(fminf(A_log, 20.0f));
  const float g = fminf(fmaxf(expf(-__fmul_rn(A, dt)), 1e-6f), 1.0f - 1e-6f);
  return make_float2(g, beta);
}

}  // namespace ssm::cuda
