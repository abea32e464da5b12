// Device memory for DeviceBuffer (cuda/pool.h): stream-ordered allocations from one memory pool
// per device that keeps what is freed (release threshold: never) instead of handing it back to
// the driver. A campaign creates a device pool per case; with cudaMalloc/cudaFree each case paid
// a few dozen allocations and frees, every cudaFree synchronising the whole device (with several
// processes on one GPU, each waiting for the others' work: docs/fuzzing.md "Processes"). Here a
// case's allocations are served from memory the process already holds and nothing synchronises.
#pragma once
#include <cuda_runtime_api.h>

#include <cstddef>

namespace ssm::cuda {

// `bytes` of device memory on the current device, usable by work queued on `stream` after this
// call and by other streams once `stream` has reached this point (a synchronise or an event).
void* device_alloc(size_t bytes, cudaStream_t stream);

// Frees `p` (from device_alloc) in `stream`'s order: after the work queued there so far, not
// after other streams' (their users synchronise them first: the engine does before any
// replacement). Never throws (destructors call it).
void device_free(void* p, cudaStream_t stream) noexcept;

// Hands the memory the current device's pool holds but no buffer uses back to the driver (a
// CudaBackend does when it dies, so a process that made one keeps nothing).
void device_memory_trim() noexcept;

}  // namespace ssm::cuda
