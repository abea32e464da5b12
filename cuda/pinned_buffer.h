// Page-locked host memory (cudaMallocHost) that only grows: the staging buffers of the engine's
// host<->device copies (inputs, outputs, readback, state digests). Freeing pinned memory waits for
// the device (cudaFreeHost synchronises), so a caller with paused async copies releases them, or
// makes sure it never grows then, before calling grow.
#pragma once
#include <cstddef>

namespace ssm::cuda {

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // At least `bytes` afterwards; a smaller or equal request keeps the buffer (and its contents).
  void grow(size_t bytes);
  char* get() const { return p_; }
  template <typename T> T* as() const { return reinterpret_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  char* p_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace ssm::cuda
