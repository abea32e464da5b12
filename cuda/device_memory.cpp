// Stream-ordered device memory from one pool per device (see device_memory.h).
#include "cuda/device_memory.h"

#include <cstdint>
#include <map>
#include <mutex>

#include "cuda/check.h"

namespace ssm::cuda {

namespace {
std::mutex pools_mutex;
std::map<int, cudaMemPool_t> pools;  // per device; live as long as the process

cudaMemPool_t pool_of_current_device() {
  int dev = 0;
  SSM_CUDA(cudaGetDevice(&dev));
  std::lock_guard<std::mutex> lock(pools_mutex);
  auto it = pools.find(dev);
  if (it != pools.end()) return it->second;
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = dev;
  cudaMemPool_t p = nullptr;
  SSM_CUDA(cudaMemPoolCreate(&p, &props));
  uint64_t keep_all = UINT64_MAX;  // a synchronise never hands freed memory back
  SSM_CUDA(cudaMemPoolSetAttribute(p, cudaMemPoolAttrReleaseThreshold, &keep_all));
  pools.emplace(dev, p);
  return p;
}
}  // namespace

void* device_alloc(size_t bytes, cudaStream_t stream) {
  void* p = nullptr;
  SSM_CUDA(cudaMallocFromPoolAsync(&p, bytes, pool_of_current_device(), stream));
  return p;
}

void device_free(void* p, cudaStream_t stream) noexcept {
  if (p) cudaFreeAsync(p, stream);
}

void device_memory_trim() noexcept {
  int dev = 0;
  if (cudaGetDevice(&dev) != cudaSuccess) return;
  std::lock_guard<std::mutex> lock(pools_mutex);
  auto it = pools.find(dev);
  if (it == pools.end()) return;
  cudaDeviceSynchronize();  // the frees queued on any stream have happened
  cudaMemPoolTrimTo(it->second, 0);
}

}  // namespace ssm::cuda
