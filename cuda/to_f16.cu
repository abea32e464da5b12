// FP32 <-> FP16 converters of STATE-MODEL section 6, bit-identical to core/half.h
// (float_to_half_rne / half_to_float), NaN payloads included.
// Types: FP32 and FP16 (as uint16 bits) arrays of n elements, out of place.
// Launch: grid-stride, 256 threads, up to 4 blocks per multiprocessor's worth (1024 blocks).
// Counterpart: reference/to_f16.cpp (narrow), reference/prefill.cpp (widen).
#include <algorithm>

#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/dependent_launch.cuh"
#include "cuda/schedule.h"
#include "cuda/to_f16.h"

namespace ssm::cuda {

namespace {
__global__ void narrow_kernel(const float* __restrict__ src, uint16_t* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = f32_to_f16_rne_bits(src[i]);
}
__global__ void widen_kernel(const uint16_t* __restrict__ src, float* __restrict__ dst, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = f16_bits_to_f32(src[i]);
}
// The widen of late_widen_stores_for_tests and of a perturbed schedule (cuda/schedule.h): a legal
// chain kernel (dependent_launch.cuh) that lets its dependent launch at once and stores only after
// `ns` nanoseconds, so that a kernel after it which reads its output without waiting for it reads
// stale data on every run (issue 41's f16-pool prefill race; mutant cuda_conv_races_widen).
__global__ void late_widen_kernel(const uint16_t* __restrict__ src, float* __restrict__ dst, size_t n, unsigned ns) {
  wait_for_previous();
  allow_dependents();
  for (unsigned slept = 0; slept < ns; slept += 1000) __nanosleep(1000);
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    dst[i] = f16_bits_to_f32(src[i]);
}
unsigned blocks_for(size_t n) { return unsigned(std::min<size_t>((n + 255) / 256, 1024)); }
unsigned g_late_widen_ns = 0;
}  // namespace

void late_widen_stores_for_tests(unsigned ns) { g_late_widen_ns = ns; }

void launch_narrow_f16(const float* src, uint16_t* dst, size_t n, cudaStream_t stream) {
  if (!n) return;
  narrow_kernel<<<blocks_for(n), 256, 0, stream>>>(src, dst, n);
  SSM_CUDA_LAUNCHED("narrow_kernel");
}

void launch_widen_f16(const uint16_t* src, float* dst, size_t n, cudaStream_t stream) {
  if (!n) return;
  Schedule* perturbed = current_schedule();
  if (g_late_widen_ns || perturbed) {
    const unsigned ns = g_late_widen_ns ? g_late_widen_ns : perturbed->delay_ns();
    return launch_dependent("late_widen_kernel", &late_widen_kernel, dim3(blocks_for(n)), dim3(256), 0, stream, src,
                            dst, n, ns);
  }
  widen_kernel<<<blocks_for(n), 256, 0, stream>>>(src, dst, n);
  SSM_CUDA_LAUNCHED("widen_kernel");
}

}  // namespace ssm::cuda
