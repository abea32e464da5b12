// Batched device copies (cuda/copies.cu): checkpoint, rollback, commit, snapshot and the
// zeroing of a claimed slot are each one list of (src, dst, bytes) run in as few launches as
// the kernel-parameter space allows.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

namespace ssm::cuda {

struct CopyDesc {
  const void* src;  // null: zero-fill dst
  void* dst;
  size_t bytes;
};

// Regions must not overlap each other's destinations; order inside one list is unspecified.
// Under a perturbed schedule (cuda/schedule.h) the copies start after a drawn delay, unless
// `delayable` is false (a read-back the host waits for at once: a delay would only cost time).
void launch_copies(const std::vector<CopyDesc>& list, cudaStream_t stream, bool delayable = true);

// Test hook of paused async copies (Engine::pause_async_copies): holds `stream` until the
// host-mapped counter *released reaches ticket (polled with __nanosleep; gives up after about
// 20 s so that a harness bug cannot hang the device forever).
void launch_wait_released(const volatile unsigned long long* released, unsigned long long ticket,
                          cudaStream_t stream);

}  // namespace ssm::cuda
