// Launchers of the FP32 <-> FP16 state converters (cuda/to_f16.cu). Out of place: src and
// dst must not overlap.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace ssm::cuda {

// dst[i] = float_to_half_rne(src[i]): round to nearest even, no saturation (to_f16, f16-pool narrow).
void launch_narrow_f16(const float* src, uint16_t* dst, size_t n, cudaStream_t stream);
// dst[i] = half_to_float(src[i]), exact (f16 prefill widen, f16-pool stage widen).
void launch_widen_f16(const uint16_t* src, float* dst, size_t n, cudaStream_t stream);

// Tests only (0: off): widens launch as programmatic dependents that let the next kernel start at
// once and store after `ns` nanoseconds, so a kernel reading a widen's output before it is
// ordered after it fails on every run, not by chance (issue 41: the f16-pool prefill divergence).
void late_widen_stores_for_tests(unsigned ns);

}  // namespace ssm::cuda
