// Page-locked host memory (cudaMallocHost) that only grows: the staging buffers of the engine's
// host<->device copies (inputs, outputs, readback, state digests).
//
// The memory comes from, and goes back to, one cache of pinned blocks per process: pinning costs
// about 0.55 ms per MiB on the H200 (cudaMallocHost: 3.8 ms for 8 MiB, 35 ms for 64 MiB), and a
// campaign makes a backend per case, whose readback buffer alone is tens of MiB on a real shape
// (14 ms of every qwen3-next-80b case's 2-layer pool creation went there). A released block waits
// for the device first, as cudaFreeHost did, so a copy still in flight never finds its memory
// handed to another buffer; the cache keeps at most kPinnedCacheBytes (a larger block, or one
// that would pass the bound, is freed at once). So a caller with paused async copies releases
// them, or makes sure it never grows then, before calling grow (the wait would never end).
#pragma once
#include <cstddef>

namespace ssm::cuda {

constexpr size_t kPinnedCacheBytes = size_t(512) << 20;

class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  ~PinnedBuffer();
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  // At least `bytes` afterwards; a smaller or equal request keeps the buffer (and its contents).
  // A larger one releases the buffer (waiting for the device) and takes the smallest cached block
  // that holds `bytes`, else pins a new one of exactly `bytes`.
  void grow(size_t bytes);
  char* get() const { return p_; }
  template <typename T> T* as() const { return reinterpret_cast<T*>(p_); }
  size_t bytes() const { return bytes_; }

 private:
  char* p_ = nullptr;
  size_t bytes_ = 0;
};

// Bytes of pinned memory the process's cache holds now, in no buffer (tests, diagnostics).
size_t pinned_cache_bytes();
// Frees every block the cache holds (buffers keep theirs). Never throws.
void pinned_cache_trim() noexcept;

}  // namespace ssm::cuda
