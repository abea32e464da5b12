// Programmatic dependent launch (Hopper and later): a kernel launched with launch_dependent()
// may start while the kernel before it on the stream is still running, once every CTA of that
// kernel has called allow_dependents() (or exited). Until it calls wait_for_previous(), it may
// only read memory that the previous kernel does not write; after it, it sees every write of
// the previous kernel (and, transitively, of everything before). Before the wait nothing is
// transitive: a kernel that calls allow_dependents() before its own wait (conv) lets its dependent
// start before the kernel before it is known complete. Used on the GDN layer's chain:
// conv -> rows (the row kernel prefetches its first H tiles while conv runs) -> output norm (its
// launch overlaps the row kernel's tail). On older GPUs the calls compile to nothing and the
// launch attribute orders kernels as a plain launch does.
#pragma once
#include <cuda_runtime.h>

#include <utility>

#include "cuda/check.h"

namespace ssm::cuda {

__device__ __forceinline__ void allow_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaTriggerProgrammaticLaunchCompletion();
#endif
}

__device__ __forceinline__ void wait_for_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cudaGridDependencySynchronize();
#endif
}

// Launches kernel<<<grid, block, smem, stream>>>(args...) as a programmatic dependent of the
// kernel before it on the stream. The kernel must call wait_for_previous() before it touches
// anything that kernel writes.
template <typename... Params, typename... Args>
void launch_dependent(const char* name, void (*kernel)(Params...), dim3 grid, dim3 block, size_t smem,
                      cudaStream_t stream, Args&&... args) {
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cuda_check(cudaLaunchKernelEx(&cfg, kernel, std::forward<Args>(args)...), name, __FILE__, __LINE__);
}

}  // namespace ssm::cuda
