// A non-blocking CUDA stream owned by an object (the engine's main and copy streams). Declared
// before the owner's device buffers, it outlives them: a buffer is freed in its stream's order
// (cuda/pool.h), so the stream must still exist when the buffer dies.
#pragma once
#include <cuda_runtime_api.h>

#include "cuda/check.h"

namespace ssm::cuda {

class Stream {
 public:
  Stream() { SSM_CUDA(cudaStreamCreateWithFlags(&s_, cudaStreamNonBlocking)); }
  ~Stream() { cudaStreamDestroy(s_); }  // returns at once; queued work still completes
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  operator cudaStream_t() const { return s_; }

 private:
  cudaStream_t s_ = nullptr;
};

}  // namespace ssm::cuda
