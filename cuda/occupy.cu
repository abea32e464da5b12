// Test hook: every SM busy for a while (see occupy.h).
#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/occupy.h"

namespace ssm::cuda {

namespace {
__global__ void occupy_kernel(unsigned long long ns) {
  extern __shared__ char block_shared[];  // large enough that no other block fits beside it
  const unsigned long long start = global_ns();
  while (global_ns() - start < ns) block_shared[threadIdx.x] = 0;
}
}  // namespace

void launch_occupy_sms(cudaStream_t stream, int milliseconds) {
  int device = 0, sms = 0, smem = 0;
  SSM_CUDA(cudaGetDevice(&device));
  SSM_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  SSM_CUDA(cudaDeviceGetAttribute(&smem, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  SSM_CUDA(cudaFuncSetAttribute(occupy_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  occupy_kernel<<<sms, 1024, size_t(smem), stream>>>(1000000ull * unsigned(milliseconds));
  SSM_CUDA_LAUNCHED("occupy_kernel");
}

}  // namespace ssm::cuda
