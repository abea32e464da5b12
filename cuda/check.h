// Host-side CUDA error check: every runtime call goes through SSM_CUDA, which throws
// std::runtime_error naming the call, file and line.
#pragma once
#include <cuda_runtime_api.h>

#include <stdexcept>
#include <string>

namespace ssm::cuda {

inline void cuda_check(cudaError_t e, const char* what, const char* file, int line) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("CUDA error ") + cudaGetErrorName(e) + " (" + cudaGetErrorString(e) +
                             ") in " + what + " at " + file + ":" + std::to_string(line));
}

}  // namespace ssm::cuda

#define SSM_CUDA(call) ::ssm::cuda::cuda_check((call), #call, __FILE__, __LINE__)
#define SSM_CUDA_LAUNCHED(name) ::ssm::cuda::cuda_check(cudaGetLastError(), name, __FILE__, __LINE__)
