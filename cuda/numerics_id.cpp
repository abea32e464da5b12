// CudaBackend::numerics_id: what determines the CUDA backend's numerics (core/backend.h).
#include <cuda_runtime_api.h>

#include <string>

#include "cuda/cuda_backend.h"

namespace ssm::numerics {
// The digest of cuda/'s sources (kernels and their launches), core's and the headers they include,
// with nvcc's and the host compiler's versions, flags and architectures: generated at build time
// (cmake/numerics.cmake). The mutant build has its own (its definitions differ).
const char* cuda_kernels();
}  // namespace ssm::numerics

namespace ssm::cuda {

// The device too: the architecture picks the machine code (sm_90's, or PTX compiled by the driver
// elsewhere), and the multiprocessor count sizes the grids that split rows over blocks.
std::string CudaBackend::numerics_id() const {
  std::string id = std::string("cuda kernels:") + numerics::cuda_kernels();
  int dev = 0, major = 0, minor = 0, sms = 0;
  if (cudaGetDevice(&dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) == cudaSuccess &&
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) == cudaSuccess)
    id += " sm_" + std::to_string(major) + std::to_string(minor) + " x" + std::to_string(sms);
  else id += " (no device)";
  return id;
}

}  // namespace ssm::cuda
