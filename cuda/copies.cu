// Batched copy / zero-fill kernel behind checkpoint, rollback, commit, snapshot and alloc.
// Types: raw bytes; 16-byte vectors when source, destination and size allow it, else 4-byte
// words, else bytes.
// Launch: grid (X, n) with n <= kBatch descriptors passed by value in the kernel parameters
//   (no host buffer to keep alive, so async copies need no staging); block 256 threads;
//   X = blocks per descriptor, sized from the largest one and capped at 512. Each descriptor's
//   bytes are grid-strided over its X blocks.
// Counterpart: reference/checkpoint.cpp, rollback.cpp, commit.cpp, snapshot.cpp.
#include <algorithm>
#include <cstdint>

#include "cuda/block_order.cuh"
#include "cuda/check.h"
#include "cuda/common.cuh"
#include "cuda/copies.h"

namespace ssm::cuda {

namespace {
constexpr int kBatch = 96;  // 96 * 24 + 8 bytes: inside the 4 KB parameter space

struct CopyBatch {
  int n;
  CopyDesc d[kBatch];
  BlockOrder order;  // set by the launch (cuda/block_order.cuh)
};

// Block x of the descriptor's `blocks` copies words x, x + blocks, ... (times blockDim.x).
template <typename W>
__device__ void copy_words(const char* src, char* dst, size_t bytes, unsigned x, unsigned blocks) {
  const size_t n = bytes / sizeof(W);
  const W* s = reinterpret_cast<const W*>(src);
  W* d = reinterpret_cast<W*>(dst);
  for (size_t i = x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(blocks) * blockDim.x) d[i] = s ? s[i] : W{};
}

template <bool ORDERED>
__global__ void copies_kernel(const __grid_constant__ CopyBatch b) {
  const uint2 lb = logical_block<ORDERED>(b.order);
  const unsigned blocks = logical_grid<ORDERED>(b.order).x;
  const CopyDesc& c = b.d[lb.y];
  const char* src = static_cast<const char*>(c.src);
  char* dst = static_cast<char*>(c.dst);
  const uintptr_t align = uintptr_t(src) | uintptr_t(dst) | uintptr_t(c.bytes);
  if (align % 16 == 0) copy_words<uint4>(src, dst, c.bytes, lb.x, blocks);
  else if (align % 4 == 0) copy_words<uint32_t>(src, dst, c.bytes, lb.x, blocks);
  else copy_words<unsigned char>(src, dst, c.bytes, lb.x, blocks);
}

// Schedule perturbation: holds the stream for `ns` nanoseconds (cuda/schedule.h).
__global__ void delay_kernel(unsigned ns) {
  const unsigned long long start = global_ns();
  while (global_ns() - start < ns) __nanosleep(1000);
}
__global__ void wait_released_kernel(const volatile unsigned long long* released, unsigned long long ticket) {
  for (long long i = 0; i < 20000000LL && *released < ticket; ++i) __nanosleep(1000);
}
}  // namespace

void launch_wait_released(const volatile unsigned long long* released, unsigned long long ticket,
                          cudaStream_t stream) {
  wait_released_kernel<<<1, 1, 0, stream>>>(released, ticket);
  SSM_CUDA_LAUNCHED("wait_released_kernel");
}

void launch_copies(const std::vector<CopyDesc>& list, cudaStream_t stream, bool delayable) {
  std::vector<CopyDesc> work;
  for (const CopyDesc& c : list)
    if (c.bytes) work.push_back(c);
  // perturbed: the copies start late, so a reader that does not wait for them (or an event recorded
  // before them) sees the bytes from before the copy on every run
  if (Schedule* s = current_schedule(); s && delayable && !work.empty()) {
    delay_kernel<<<1, 1, 0, stream>>>(s->delay_ns());
    SSM_CUDA_LAUNCHED("delay_kernel");
  }
  for (size_t first = 0; first < work.size(); first += kBatch) {
    CopyBatch b{};
    size_t largest = 0;
    for (size_t i = first; i < work.size() && b.n < kBatch; ++i) {
      b.d[b.n++] = work[i];
      largest = std::max(largest, work[i].bytes);
    }
    const unsigned x = unsigned(std::min<size_t>(std::max<size_t>((largest + 4095) / 4096, 1), 512));
    launch_ordered("copies_kernel", OrderedKernel<CopyBatch>{&copies_kernel<false>, &copies_kernel<true>}, dim3(x, unsigned(b.n)), dim3(256), 0, stream, false, b,
                   &CopyBatch::order);
  }
}

}  // namespace ssm::cuda
