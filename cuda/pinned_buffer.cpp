#include "cuda/pinned_buffer.h"

#include <cuda_runtime_api.h>

#include "cuda/check.h"

namespace ssm::cuda {

PinnedBuffer::~PinnedBuffer() {
  if (p_) cudaFreeHost(p_);
}

void PinnedBuffer::grow(size_t bytes) {
  if (bytes <= bytes_) return;
  if (p_) SSM_CUDA(cudaFreeHost(p_));
  p_ = nullptr;
  bytes_ = 0;
  SSM_CUDA(cudaMallocHost(reinterpret_cast<void**>(&p_), bytes));
  bytes_ = bytes;
}

}  // namespace ssm::cuda
