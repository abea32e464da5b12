// Asynchronous capture's staging ring, side-stream copies and writer thread (capture/async.h).
#include "async.h"

#include <algorithm>
#include <cstdlib>
#include <stdexcept>
#include <utility>
#include <fmt/core.h>
#ifdef SSMC_WITH_CUDA
#include <cuda_runtime_api.h>
#endif

namespace ssmc_async {

namespace {
#ifdef SSMC_WITH_CUDA
void cuda_ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(fmt::format("{} failed: {}", what, cudaGetErrorString(e)));
}

// The stream kept in `s`, created (non-blocking) at its first use.
cudaStream_t stream_in(void*& s, const char* what) {
  if (!s) {
    cudaStream_t n = nullptr;
    cuda_ok(cudaStreamCreateWithFlags(&n, cudaStreamNonBlocking),
            fmt::format("cudaStreamCreateWithFlags ({})", what).c_str());
    s = n;
  }
  return static_cast<cudaStream_t>(s);
}
#endif
}  // namespace

Async::Async(size_t arena_bytes, Policy policy, std::function<std::string(const QueuedOp&, const char*)> write)
    : write_(std::move(write)), policy_(policy), cap_(arena_bytes) {
#ifdef SSMC_WITH_CUDA
  // pinned, so that the side stream's copies run asynchronously at full speed; without a device
  // (a CPU machine running a CUDA build) plain memory serves host pointers
  void* p = nullptr;
  if (cudaHostAlloc(&p, cap_, cudaHostAllocDefault) == cudaSuccess) {
    base_ = static_cast<char*>(p);
    pinned_ = true;
  } else {
    cudaGetLastError();
  }
#endif
  if (!base_) base_ = static_cast<char*>(std::aligned_alloc(256, (cap_ + 255) / 256 * 256));
  if (!base_) throw std::bad_alloc();
  thread_ = std::thread([this] { run(); });
}

Async::~Async() {
  {
    const std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
#ifdef SSMC_WITH_CUDA
  // copies still in flight write into the arena: wait for them before it is freed
  if (side_) {
    cudaStreamSynchronize(static_cast<cudaStream_t>(side_));
    cudaStreamDestroy(static_cast<cudaStream_t>(side_));
  }
  if (stage_) {
    cudaStreamSynchronize(static_cast<cudaStream_t>(stage_));
    cudaStreamDestroy(static_cast<cudaStream_t>(stage_));
  }
  for (DevRange& r : dev_inflight_) cudaEventDestroy(static_cast<cudaEvent_t>(r.done));
  if (dev_base_) cudaFree(dev_base_);
  for (QueuedOp& q : queue_)
    if (q.copied) cudaEventDestroy(static_cast<cudaEvent_t>(q.copied));
  if (pinned_) {
    cudaFreeHost(base_);
    return;
  }
#endif
  std::free(base_);
}

bool Async::reserve(size_t n, bool may_drop, uint64_t& pos) {
  n = (n + 255) / 256 * 256;
  if (n > cap_) {
    if (may_drop) return false;
    throw std::length_error(fmt::format("the op needs {} bytes of staging, more than the {} of the pool", n, cap_));
  }
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    uint64_t p = head_;
    const uint64_t off = p % cap_;
    if (off + n > cap_) {
      p += cap_ - off;                        // an op's bytes never wrap: skip the arena's end
      if (tail_ == head_) tail_ = head_ = p;  // nothing in flight: start the next lap
    }
    if (p + n - tail_ <= cap_) {
      pos = p;
      head_ = p + n;
      return true;
    }
    if (may_drop) return false;
    cv_.wait(lk);
  }
}

void Async::set_device_staging(size_t bytes) {
#ifdef SSMC_WITH_CUDA
  void* p = nullptr;
  cuda_ok(cudaMalloc(&p, bytes), fmt::format("cudaMalloc of {} bytes of device staging", bytes).c_str());
  // written once, so that the gaps between an op's ranges, copied along with them, are defined bytes
  const cudaError_t e = cudaMemset(p, 0, bytes);
  if (e != cudaSuccess) {
    cudaFree(p);
    cuda_ok(e, "cudaMemset of the device staging");
  }
  dev_base_ = static_cast<char*>(p);
  dev_cap_ = bytes;
#else
  (void)bytes;
  throw std::runtime_error("this libssmcheck_capture was built without CUDA");
#endif
}

void* Async::dev_reserve(size_t n, uint64_t& pos) {
  n = (n + 255) / 256 * 256;
  if (!dev_base_ || n > dev_cap_) return nullptr;
#ifdef SSMC_WITH_CUDA
  const cudaStream_t stage = stream_in(stage_, "the capture's device staging stream");
  auto give_back_oldest = [&] {  // its range is free (or will be, for the copies `stage` makes next)
    dev_tail_ = std::max(dev_tail_, dev_inflight_.front().end);
    cudaEventDestroy(static_cast<cudaEvent_t>(dev_inflight_.front().done));  // released once recorded work completes
    dev_inflight_.pop_front();
  };
  while (!dev_inflight_.empty()) {  // the ranges whose device-to-host copy is done
    const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(dev_inflight_.front().done));
    if (e == cudaErrorNotReady) break;
    cuda_ok(e, "the device staging's device-to-host copy");
    give_back_oldest();
  }
  uint64_t p = dev_head_;
  const uint64_t off = p % dev_cap_;
  if (off + n > dev_cap_) p += dev_cap_ - off;  // a range never wraps
  // full: the copy into the ring waits, on the device, for the device-to-host copies of the oldest
  // ranges it reuses (the copy engine's pace; the engine's thread never waits)
  while (!dev_inflight_.empty() && p + n - dev_tail_ > dev_cap_) {
    cuda_ok(cudaStreamWaitEvent(stage, static_cast<cudaEvent_t>(dev_inflight_.front().done), 0),
            "cudaStreamWaitEvent (the device staging stream)");
    give_back_oldest();
  }
  if (dev_inflight_.empty()) dev_tail_ = p;  // nothing in flight that the range could overlap
  pos = p;
  dev_head_ = p + n;
  return stage;
#else
  (void)pos;
  return nullptr;
#endif
}

void Async::copy_from_device(QueuedOp& op, const std::vector<DeviceCopy>& copies, void* stream) {
  if (copies.empty()) return;
#ifdef SSMC_WITH_CUDA
  const cudaStream_t side = stream_in(side_, "the capture's side stream"), engine = static_cast<cudaStream_t>(stream);
  // the ranges lie in ascending order inside the op's staging range: one span, copied whole
  const uint64_t first = copies.front().pos, span = copies.back().pos + copies.back().bytes - first;
  uint64_t dev = 0;
  const cudaStream_t stage = static_cast<cudaStream_t>(dev_reserve(span, dev));
  cudaEvent_t ready = nullptr, copied = nullptr;
  cuda_ok(cudaEventCreateWithFlags(&ready, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  cuda_ok(cudaEventCreateWithFlags(&copied, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  op.copied = copied;
  // the engine's work so far (which produced the arrays) before the copies; the engine's later
  // work (which may overwrite them) after the copies: both waits are on the device
  cuda_ok(cudaEventRecord(ready, engine), "cudaEventRecord on the engine's stream");
  cuda_ok(cudaStreamWaitEvent(stage ? stage : side, ready, 0), "cudaStreamWaitEvent (the capture's stream)");
  cudaEventDestroy(ready);  // released once recorded work completes
  if (!stage) {             // the direct way: the engine waits for the device-to-host copies
    for (const DeviceCopy& c : copies)
      cuda_ok(cudaMemcpyAsync(at(c.pos), c.src, c.bytes, cudaMemcpyDeviceToHost, side),
              fmt::format("cudaMemcpyAsync of {} bytes from device pointer {}", c.bytes, c.src).c_str());
    cuda_ok(cudaEventRecord(copied, side), "cudaEventRecord on the side stream");
    cuda_ok(cudaStreamWaitEvent(engine, copied, 0), "cudaStreamWaitEvent (the engine's stream)");
    return;
  }
  // device staging: the engine waits for the device-to-device copies into the ring only; the
  // device-to-host copy of the ring follows on the side stream
  char* ring = dev_base_ + dev % dev_cap_;
  for (const DeviceCopy& c : copies)
    cuda_ok(cudaMemcpyAsync(ring + (c.pos - first), c.src, c.bytes, cudaMemcpyDeviceToDevice, stage),
            fmt::format("cudaMemcpyAsync of {} bytes from device pointer {} into the device staging", c.bytes, c.src)
                .c_str());
  cudaEvent_t in_ring = nullptr, freed = nullptr;
  cuda_ok(cudaEventCreateWithFlags(&in_ring, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  cuda_ok(cudaEventRecord(in_ring, stage), "cudaEventRecord on the device staging stream");
  const cudaError_t w1 = cudaStreamWaitEvent(engine, in_ring, 0), w2 = cudaStreamWaitEvent(side, in_ring, 0);
  cudaEventDestroy(in_ring);
  cuda_ok(w1, "cudaStreamWaitEvent (the engine's stream)");
  cuda_ok(w2, "cudaStreamWaitEvent (side stream)");
  cuda_ok(cudaMemcpyAsync(at(first), ring, span, cudaMemcpyDeviceToHost, side),
          fmt::format("cudaMemcpyAsync of {} bytes from the device staging", span).c_str());
  cuda_ok(cudaEventRecord(copied, side), "cudaEventRecord on the side stream");
  cuda_ok(cudaEventCreateWithFlags(&freed, cudaEventDisableTiming), "cudaEventCreateWithFlags");
  cuda_ok(cudaEventRecord(freed, side), "cudaEventRecord on the side stream");
  dev_inflight_.push_back({dev + (span + 255) / 256 * 256, freed});
  ++dev_staged_;
#else
  (void)op;
  (void)stream;
  throw std::runtime_error("device pointers, but this libssmcheck_capture was built without CUDA");
#endif
}

void Async::push(QueuedOp op) {
  {
    const std::lock_guard<std::mutex> lk(mu_);
    queue_.push_back(std::move(op));
  }
  cv_.notify_all();
}

void Async::drain() {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait(lk, [&] { return queue_.empty() && !writing_; });
}

std::vector<std::string> Async::take_failures() {
  const std::lock_guard<std::mutex> lk(mu_);
  return std::exchange(unreported_, {});
}

int Async::failures() const {
  const std::lock_guard<std::mutex> lk(mu_);
  return failures_;
}

std::string Async::first_failure() const {
  const std::lock_guard<std::mutex> lk(mu_);
  return first_failure_;
}

int64_t Async::queued() const {
  const std::lock_guard<std::mutex> lk(mu_);
  return int64_t(queue_.size()) + (writing_ ? 1 : 0);
}

void Async::run() {
  for (;;) {
    QueuedOp op;
    {
      std::unique_lock<std::mutex> lk(mu_);
      cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;  // queued ops are dropped, as by a crash (ssmc_close drains first)
      op = std::move(queue_.front());
      queue_.pop_front();
      writing_ = true;
    }
    std::string err;
#ifdef SSMC_WITH_CUDA
    if (op.copied) {
      const cudaError_t e = cudaEventSynchronize(static_cast<cudaEvent_t>(op.copied));
      cudaEventDestroy(static_cast<cudaEvent_t>(op.copied));
      if (e != cudaSuccess)
        err = fmt::format("op {} '{}': the copy of its device arrays failed: {}", op.index, op.text,
                          cudaGetErrorString(e));
    }
#endif
    if (err.empty()) {
      try {
        err = write_(op, base_);
      } catch (const std::exception& e) {
        err = fmt::format("op {} '{}': {}", op.index, op.text, e.what());
      }
    }
    {
      const std::lock_guard<std::mutex> lk(mu_);
      writing_ = false;
      tail_ = std::max(tail_, op.end);  // a zero-byte op's end may lie before a new lap's start
      if (!err.empty()) {
        if (failures_++ == 0) first_failure_ = err;
        unreported_.push_back(err);
      }
    }
    cv_.notify_all();
  }
}

}  // namespace ssmc_async
