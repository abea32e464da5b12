// Page-locked host memory from a per-process cache of pinned blocks (see pinned_buffer.h).
#include "cuda/pinned_buffer.h"

#include <cuda_runtime_api.h>

#include <map>
#include <mutex>

#include "cuda/check.h"

namespace ssm::cuda {

namespace {

// The cache: free blocks by size. Never destroyed (a static destructor would free pinned memory
// after the CUDA runtime has gone at exit; the process's end frees it).
struct PinnedCache {
  std::mutex m;
  std::multimap<size_t, char*> blocks;
  size_t bytes = 0;
};
PinnedCache& cache() {
  static PinnedCache* c = new PinnedCache();
  return *c;
}

// The smallest cached block of at least `bytes`, out of the cache; {nullptr, 0} when none.
std::pair<char*, size_t> take(size_t bytes) {
  PinnedCache& c = cache();
  std::lock_guard<std::mutex> lock(c.m);
  const auto it = c.blocks.lower_bound(bytes);
  if (it == c.blocks.end()) return {nullptr, 0};
  const std::pair<char*, size_t> block{it->second, it->first};
  c.bytes -= it->first;
  c.blocks.erase(it);
  return block;
}

// Back into the cache once the device is idle (what cudaFreeHost waited for), or freed when the
// cache would pass its bound. Never throws (destructors call it).
void give_back(char* p, size_t bytes) noexcept {
  cudaDeviceSynchronize();
  PinnedCache& c = cache();
  {
    std::lock_guard<std::mutex> lock(c.m);
    if (c.bytes + bytes <= kPinnedCacheBytes) {
      c.blocks.emplace(bytes, p);
      c.bytes += bytes;
      return;
    }
  }
  cudaFreeHost(p);
}

}  // namespace

PinnedBuffer::~PinnedBuffer() {
  if (p_) give_back(p_, bytes_);
}

void PinnedBuffer::grow(size_t bytes) {
  if (bytes <= bytes_) return;
  if (p_) give_back(p_, bytes_);
  p_ = nullptr;
  bytes_ = 0;
  const std::pair<char*, size_t> cached = take(bytes);
  if (cached.first) {
    p_ = cached.first;
    bytes_ = cached.second;
    return;
  }
  SSM_CUDA(cudaMallocHost(reinterpret_cast<void**>(&p_), bytes));
  bytes_ = bytes;
}

void pinned_cache_trim() noexcept {
  PinnedCache& c = cache();
  std::lock_guard<std::mutex> lock(c.m);
  for (const auto& block : c.blocks) cudaFreeHost(block.second);
  c.blocks.clear();
  c.bytes = 0;
}

size_t pinned_cache_bytes() {
  PinnedCache& c = cache();
  std::lock_guard<std::mutex> lock(c.m);
  return c.bytes;
}

}  // namespace ssm::cuda
