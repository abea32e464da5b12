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

}  // namespace ssm::cuda
