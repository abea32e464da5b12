// Device side of tests/half_store_gpu_test.cpp (see half_store_kernels.h).
#include <cuda_fp16.h>

#include <stdexcept>

#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/pool.h"
#include "tests/half_store_kernels.h"

namespace ssm::test {
namespace {

__global__ void half_stores_kernel(const float* in, uint16_t* one, uint16_t* pairs, size_t n_pairs) {
  for (size_t p = blockIdx.x * size_t(blockDim.x) + threadIdx.x; p < n_pairs; p += size_t(gridDim.x) * blockDim.x) {
    const float a = in[2 * p], b = in[2 * p + 1];
    one[2 * p] = __half_as_ushort(cuda::store_half_clamped(a));
    one[2 * p + 1] = __half_as_ushort(cuda::store_half_clamped(b));
    const __half2 h = cuda::store_half2_clamped(a, b);
    pairs[2 * p] = __half_as_ushort(__low2half(h));
    pairs[2 * p + 1] = __half_as_ushort(__high2half(h));
  }
}

}  // namespace

DeviceHalfStores device_half_stores(const std::vector<float>& values) {
  if (values.size() % 2) throw std::invalid_argument("device_half_stores: an odd number of values");
  const size_t n = values.size();
  DeviceHalfStores out{std::vector<uint16_t>(n), std::vector<uint16_t>(n)};
  const cuda::DeviceBuffer in(n * sizeof(float), "values"), one(n * sizeof(uint16_t), "one"),
      pairs(n * sizeof(uint16_t), "pairs");
  SSM_CUDA(cudaMemcpy(in.get(), values.data(), n * sizeof(float), cudaMemcpyHostToDevice));
  half_stores_kernel<<<1024, 256>>>(reinterpret_cast<const float*>(in.get()), reinterpret_cast<uint16_t*>(one.get()),
                                    reinterpret_cast<uint16_t*>(pairs.get()), n / 2);
  SSM_CUDA_LAUNCHED("half_stores_kernel");
  SSM_CUDA(cudaMemcpy(out.one.data(), one.get(), n * sizeof(uint16_t), cudaMemcpyDeviceToHost));
  SSM_CUDA(cudaMemcpy(out.pairs.data(), pairs.get(), n * sizeof(uint16_t), cudaMemcpyDeviceToHost));
  return out;
}

}  // namespace ssm::test
