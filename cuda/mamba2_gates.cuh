// Mamba-2 gates of STATE-MODEL section 3 in FP32: dt = softplus(dt_raw + dt_bias) with torch's
// threshold (linear above 20), clamped to [dt_min, dt_max] as std::clamp does (a NaN stays NaN),
// dA = max(exp(-exp(A_log) dt), 2^-149) (an infinite state stays infinite). The conv kernel is
// the only caller. Counterpart: reference/mamba2_gates.cpp.
#pragma once
#include "core/layer_spec.h"
#include "cuda/common.cuh"

namespace ssm::cuda {

// threshold: the softplus threshold (20); only a mutant passes another value.
__device__ __forceinline__ float2 mamba2_gates(float dt_raw, float A_log, float dt_bias, float dt_min, float dt_max,
                                               float threshold = 20.0f) {
  const float x = __fadd_rn(dt_raw, dt_bias);
  const float sp = x > threshold ? x : log1pf(expf(x));
  const float dt = sp < dt_min ? dt_min : (dt_max < sp ? dt_max : sp);
  const float e = expf(-__fmul_rn(expf(A_log), dt));  // subnormals kept (no ftz in this build)
  const float dA = e < kMamba2MinDecay ? kMamba2MinDecay : e;  // as std::max: a NaN stays NaN
  return make_float2(dt, dA);
}

}  // namespace ssm::cuda
