// Region digests (cuda/region_digest.h): grid (X, n) with n <= kBatch regions passed by value,
// block 256 threads; each region's units are grid-strided over its X blocks, each thread sums
// mix(unit, index) in 64-bit integers, a warp adds its lanes by shuffles, and lane 0 adds the
// warp's sum into out[region] with an integer atomicAdd (exact and order-free).
// Counterpart: core/state_digest.h (the host digest of an export, XXH3: another function; a
// backend's digests are only compared with its own earlier ones).
#include <algorithm>
#include <cstdint>

#include "cuda/check.h"
#include "cuda/region_digest.h"

namespace ssm::cuda {

namespace {
constexpr int kBatch = 200;  // 200 * 16 + 8 bytes: inside the 4 KB parameter space

struct DigestBatch {
  int n;
  DigestRegion r[kBatch];
};

// splitmix64's finaliser of (value + index * golden ratio): a bijection of the sum for a fixed
// index, so two values of one unit always mix differently.
__device__ __forceinline__ uint64_t mix(uint64_t v, uint64_t index) {
  uint64_t z = v + index * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

template <typename U>
__device__ uint64_t sum_units(const char* src, size_t bytes) {
  const size_t n = bytes / sizeof(U);
  const U* p = reinterpret_cast<const U*>(src);
  uint64_t s = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    if constexpr (sizeof(U) == 16) {
      const uint4 w = p[i];
      s += mix(uint64_t(w.x) | uint64_t(w.y) << 32, 2 * i) + mix(uint64_t(w.z) | uint64_t(w.w) << 32, 2 * i + 1);
    } else {
      s += mix(uint64_t(p[i]), i);
    }
  }
  return s;
}

__global__ void region_digests_kernel(const __grid_constant__ DigestBatch b, unsigned long long* out) {
  const DigestRegion& r = b.r[blockIdx.y];
  const char* src = static_cast<const char*>(r.src);
  const uintptr_t align = uintptr_t(src) | uintptr_t(r.bytes);
  uint64_t s = align % 16 == 0 ? sum_units<uint4>(src, r.bytes)
               : align % 2 == 0 ? sum_units<uint16_t>(src, r.bytes)
                                : sum_units<unsigned char>(src, r.bytes);
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if ((threadIdx.x & 31) == 0 && s != 0) atomicAdd(out + blockIdx.y, static_cast<unsigned long long>(s));
}
}  // namespace

void launch_region_digests(const std::vector<DigestRegion>& regions, unsigned long long* out, cudaStream_t stream) {
  if (regions.empty()) return;
  SSM_CUDA(cudaMemsetAsync(out, 0, regions.size() * sizeof(unsigned long long), stream));
  for (size_t first = 0; first < regions.size(); first += kBatch) {
    DigestBatch b{};
    size_t largest = 0;
    for (size_t i = first; i < regions.size() && b.n < kBatch; ++i) {
      b.r[b.n++] = regions[i];
      largest = std::max(largest, regions[i].bytes);
    }
    const unsigned x = unsigned(std::min<size_t>(std::max<size_t>((largest + 8191) / 8192, 1), 256));
    region_digests_kernel<<<dim3(x, unsigned(b.n)), 256, 0, stream>>>(b, out + first);
    SSM_CUDA_LAUNCHED("region_digests_kernel");
  }
}

}  // namespace ssm::cuda
